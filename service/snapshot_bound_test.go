package service_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/service"
	"github.com/podsapi/podsapi/test/podstest"
)

// holderWindow is the HTTP/2 flow-control window, of the stream and of the
// connection, of a holder: a watch of a larger snapshot that does not read
// keeps the service's write blocked, and its snapshot in flight.
const holderWindow = 64 << 10

// TestSnapshotBounded holds as many snapshots in flight as the service
// allows, each of a distinct field mask: a watch with one more mask streams
// its events (streamSnapshot), and receives the same snapshot; a watch with the
// mask of a snapshot in flight shares it; once the holders leave, nothing is
// kept, and the snapshot is built again. Every wait is for an event: a
// holder's first event (its snapshot is built), a watch served to its end
// (its snapshot released).
func TestSnapshotBounded(t *testing.T) {
	const inFlight = 16 // the bound of the service
	const padding = 16 << 10
	var pods []*corev1.Pod
	for i := range 16 {
		p := podstest.Pod("default", fmt.Sprintf("pod-%02d", i), i)
		p.Annotations = map[string]string{"example.com/padding": strings.Repeat("x", padding)}
		pods = append(pods, p)
	}
	if n := (len(pods) - 1) * padding; n < 2*holderWindow {
		t.Fatalf("%d bytes of snapshot after the first event, want at least %d to hold it", n, 2*holderWindow)
	}
	reg := prometheus.NewRegistry()
	h := newHarness(t, synced(nil, pods...), true, service.WithMetrics(service.NewMetrics(reg)))
	// Every mask keeps the annotations, and a distinct subset of paths.
	paths := []string{"status.phase", "status.podIP", "metadata.labels", "spec.nodeName", "status.hostIP"}
	var masks []string
	for bits := range 1 << len(paths) {
		mask := []string{"metadata.annotations"}
		for i, p := range paths {
			if bits&(1<<i) != 0 {
				mask = append(mask, p)
			}
		}
		masks = append(masks, strings.Join(mask, ","))
	}
	masks = masks[:inFlight+1]
	expect := func(computes, hits float64) {
		t.Helper()
		if c, h := podstest.MetricValue(t, reg, "podsapi_view_computes_total", snapshotView), podstest.MetricValue(t, reg, "podsapi_view_cache_hits_total", snapshotView); c != computes || h != hits {
			t.Fatalf("snapshots built %v times and reused %v times, want %v and %v", c, h, computes, hits)
		}
	}
	expectKept := func(snapshots float64) {
		t.Helper()
		n, b := podstest.MetricValue(t, reg, "podsapi_watch_snapshots", nil), podstest.MetricValue(t, reg, "podsapi_watch_snapshots_bytes", nil)
		if n != snapshots || (snapshots == 0) != (b == 0) {
			t.Fatalf("%v snapshots of %v bytes in flight, want %v", n, b, snapshots)
		}
	}
	watch := func(c podsv1alpha1connect.PodsClient, ctx context.Context, mask string) *connect.ServerStreamForClient[podsv1alpha1.PodWatchResponse] {
		t.Helper()
		req := connect.NewRequest(&podsv1alpha1.PodWatchRequest{})
		req.Header().Set("X-Kubernetes-Fieldmask", mask)
		s, err := c.WatchPods(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	next := func(s *connect.ServerStreamForClient[podsv1alpha1.PodWatchResponse]) *podsv1alpha1.PodWatchResponse {
		t.Helper()
		if !s.Receive() {
			t.Fatalf("watch: %v", s.Err())
		}
		return s.Msg()
	}

	// A holder of each of the first inFlight masks, each on a connection
	// of its own whose windows its snapshot overflows. Its first event
	// comes once its snapshot is built.
	holdCtx, leave := context.WithCancel(t.Context())
	defer leave()
	for _, mask := range masks[:inFlight] {
		hc := h.client(t, &http.HTTP2Config{MaxReceiveBufferPerStream: holderWindow, MaxReceiveBufferPerConnection: holderWindow})
		next(watch(podsv1alpha1connect.NewPodsClient(hc, baseURL, connect.WithGRPC()), holdCtx, mask))
	}
	expect(inFlight, 0)
	expectKept(inFlight)

	c := podsv1alpha1connect.NewPodsClient(h.http, baseURL, connect.WithGRPC())
	served := inFlight // the watches served to their end once the holders leave
	whole := func(mask string) {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		s := watch(c, ctx, mask)
		for j, p := range pods {
			ev := next(s)
			if ev.GetType() != podsv1alpha1.EventType_EVENT_TYPE_ADDED || ev.GetPod().GetMetadata().GetName() != p.Name || ev.GetPod().GetMetadata().GetAnnotations()["example.com/padding"] != p.Annotations["example.com/padding"] {
				t.Fatalf("watch of %s: event %d is %v of %q, want ADDED of %q with its annotation", mask, j, ev.GetType(), ev.GetPod().GetMetadata().GetName(), p.Name)
			}
		}
		if ev := next(s); ev.GetType() != podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE {
			t.Fatalf("watch of %s: %v after the snapshot, want INITIAL_SYNC_COMPLETE", mask, ev.GetType())
		}
		served++
	}
	// One more mask is not built: its events are streamed.
	whole(masks[inFlight])
	expect(inFlight, 0)
	// The mask of a holder shares its snapshot.
	whole(masks[0])
	expect(inFlight, 1)

	// Once the holders leave, nothing is kept: the snapshot is built again.
	leave()
	h.events.WaitServed(t, podsv1alpha1connect.PodsWatchPodsProcedure, served)
	expectKept(0)
	whole(masks[0])
	expect(inFlight+1, 1)
	h.events.WaitServed(t, podsv1alpha1connect.PodsWatchPodsProcedure, served)
	expectKept(0)
}
