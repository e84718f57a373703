package server_test

import (
	"bytes"
	"net/http"
	"slices"
	"testing"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	"github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1/v1alpha1connect"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/internal/h2c"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/test/podstest"
)

// kubeletClient returns a gRPC client of the kubelet's own Pods API on the
// socket.
func kubeletClient(t *testing.T, socket string) v1alpha1connect.PodsClient {
	t.Helper()
	return v1alpha1connect.NewPodsClient(podstest.HTTPClient(t, socket), h2c.BaseURL, connect.WithGRPC(),
		connect.WithReadMaxBytes(podstest.MaxMessageBytes))
}

// withMask returns req with the field mask header set, if paths are given.
func withMask[T any](req *connect.Request[T], paths string) *connect.Request[T] {
	if paths != "" {
		req.Header().Set("x-kubernetes-fieldmask", paths)
	}
	return req
}

// kubeletEvent returns the next event of a kubelet-wire watch.
func kubeletEvent(t *testing.T, s *connect.ServerStreamForClient[v1alpha1.WatchPodsEvent]) *v1alpha1.WatchPodsEvent {
	t.Helper()
	if !s.Receive() {
		t.Fatalf("kubelet watch: %v", s.Err())
	}
	return s.Msg()
}

// decodePod decodes a pod of the kubelet wire.
func decodePod(t *testing.T, b []byte) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	if err := pod.Unmarshal(b); err != nil {
		t.Fatalf("v1.Pod.Unmarshal: %v", err)
	}
	return pod
}

// TestKubeletWire lists, gets and watches through the kubelet's wire: the
// same pods as the typed wire, byte for byte, the snapshot then
// INITIAL_SYNC_COMPLETE, live events, and DELETED with the last known state.
func TestKubeletWire(t *testing.T) {
	pods := podstest.SamplePods()
	f := start(t, server.Config{Limits: server.LimitsConfig{QPS: -1}}, false, pods...)
	kc := kubeletClient(t, f.socket)
	// The typed ListPods, read as pods of bytes: its response is the
	// kubelet's byte for byte.
	typed := connect.NewClient[podsv1alpha1.PodListRequest, v1alpha1.ListPodsResponse](podstest.HTTPClient(t, f.socket),
		h2c.BaseURL+podsv1alpha1connect.PodsListPodsProcedure, connect.WithGRPC(), connect.WithReadMaxBytes(podstest.MaxMessageBytes))
	for _, m := range []string{"", "status.phase,metadata.labels"} {
		list, err := kc.ListPods(ctx(t), withMask(connect.NewRequest(&v1alpha1.ListPodsRequest{}), m))
		if err != nil {
			t.Fatalf("ListPods (mask %q): %v", m, err)
		}
		tl, err := typed.CallUnary(ctx(t), withMask(connect.NewRequest(&podsv1alpha1.PodListRequest{}), m))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(list.Msg.GetPods(), tl.Msg.GetPods(), bytes.Equal) || len(list.Msg.GetPods()) != len(pods) {
			t.Fatalf("mask %q: the kubelet wire's ListPods (%d pods) differs from the typed one (%d pods)", m, len(list.Msg.GetPods()), len(tl.Msg.GetPods()))
		}
		for i, raw := range list.Msg.GetPods() {
			got, err := kc.GetPod(ctx(t), withMask(connect.NewRequest(&v1alpha1.GetPodRequest{PodUID: string(pods[i].UID)}), m))
			if err != nil {
				t.Fatalf("GetPod: %v", err)
			}
			if !bytes.Equal(got.Msg.GetPod(), raw) {
				t.Errorf("mask %q: GetPod(%s) differs from its ListPods element", m, pods[i].UID)
			}
			if pod := decodePod(t, raw); m != "" && (pod.Name != "" || pod.Status.Phase == "") {
				t.Errorf("mask %q: pod %+v", m, pod)
			}
		}
	}
	for _, tc := range []struct {
		name string
		uid  string
		code connect.Code
	}{
		{"unknown UID", "no-such-uid", connect.CodeNotFound},
		{"empty UID, as a kubelet answers it", "", connect.CodeNotFound},
	} {
		if _, err := kc.GetPod(ctx(t), connect.NewRequest(&v1alpha1.GetPodRequest{PodUID: tc.uid})); connect.CodeOf(err) != tc.code {
			t.Errorf("GetPod, %s: %v, want %v", tc.name, err, tc.code)
		}
	}

	w, err := kc.WatchPods(ctx(t), connect.NewRequest(&v1alpha1.WatchPodsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, p := range pods {
		ev := kubeletEvent(t, w)
		if got := decodePod(t, ev.GetPod()); ev.GetType() != v1alpha1.EventType_ADDED || got.UID != p.UID {
			t.Fatalf("snapshot: %v %s, want ADDED %s", ev.GetType(), got.UID, p.UID)
		}
	}
	if ev := kubeletEvent(t, w); ev.GetType() != v1alpha1.EventType_INITIAL_SYNC_COMPLETE || len(ev.GetPod()) != 0 {
		t.Fatalf("after the snapshot: %v with %d bytes, want INITIAL_SYNC_COMPLETE without a pod", ev.GetType(), len(ev.GetPod()))
	}
	changed := pods[1].DeepCopy()
	changed.Status.Phase = corev1.PodFailed
	f.store.Upsert(changed)
	f.store.Delete(pods[2].UID)
	want, _ := changed.Marshal()
	if ev := kubeletEvent(t, w); ev.GetType() != v1alpha1.EventType_MODIFIED || !bytes.Equal(ev.GetPod(), want) {
		t.Fatalf("after a change: %v, want MODIFIED with the new pod", ev.GetType())
	}
	want, _ = pods[2].Marshal()
	if ev := kubeletEvent(t, w); ev.GetType() != v1alpha1.EventType_DELETED || !bytes.Equal(ev.GetPod(), want) {
		t.Fatalf("after a deletion: %v, want DELETED with the last known pod", ev.GetType())
	}
}

// TestKubeletWireGuards checks that the guards of the typed wire hold on
// the kubelet's: readiness, and one rate-limit bucket for both wires.
func TestKubeletWireGuards(t *testing.T) {
	t.Run("readiness", func(t *testing.T) {
		f := start(t, server.Config{}, true, podstest.SamplePods()...)
		kc := kubeletClient(t, f.socket)
		if _, err := kc.ListPods(ctx(t), connect.NewRequest(&v1alpha1.ListPodsRequest{})); connect.CodeOf(err) != connect.CodeFailedPrecondition {
			t.Errorf("ListPods before sync: %v, want FailedPrecondition", err)
		}
		w, err := kc.WatchPods(ctx(t), connect.NewRequest(&v1alpha1.WatchPodsRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if w.Receive() || connect.CodeOf(w.Err()) != connect.CodeFailedPrecondition {
			t.Errorf("WatchPods before sync: %v, want FailedPrecondition", w.Err())
		}
	})
	t.Run("one bucket", func(t *testing.T) {
		pods := podstest.SamplePods()
		// So low a rate that no token comes back during the test.
		f := start(t, server.Config{Limits: server.LimitsConfig{QPS: 1e-6, Burst: 3, RateLimitDelay: -1}}, false, pods...)
		kc := kubeletClient(t, f.socket)
		typed := podstest.ConnectClient(t, f.socket)
		for i := range 3 {
			var err error
			if i%2 == 0 {
				_, err = typed.ListPods(ctx(t), connect.NewRequest(&podsv1alpha1.PodListRequest{}))
			} else {
				_, err = kc.ListPods(ctx(t), connect.NewRequest(&v1alpha1.ListPodsRequest{}))
			}
			if err != nil {
				t.Fatalf("call %d within the burst: %v", i, err)
			}
		}
		if _, err := kc.GetPod(ctx(t), connect.NewRequest(&v1alpha1.GetPodRequest{PodUID: string(pods[0].UID)})); connect.CodeOf(err) != connect.CodeResourceExhausted {
			t.Errorf("kubelet GetPod beyond the shared burst: %v, want ResourceExhausted", err)
		}
		if _, err := typed.GetPod(ctx(t), connect.NewRequest(&podsv1alpha1.PodGetRequest{PodUID: string(pods[0].UID)})); connect.CodeOf(err) != connect.CodeResourceExhausted {
			t.Errorf("typed GetPod beyond the shared burst: %v, want ResourceExhausted", err)
		}
	})
}

// TestKubeletWireSharesViews checks that a second wire costs no encoding:
// with watchers and lists on both wires, one change is encoded once, its
// masked view computed once, and a list built for one wire is reused by the
// other. The calls of both wires are counted by the seed's metrics.
func TestKubeletWireSharesViews(t *testing.T) {
	reg := prometheus.NewRegistry()
	pods := podstest.SamplePods()
	f := start(t, server.Config{Registry: reg, Limits: server.LimitsConfig{QPS: -1}}, false, pods...)
	kc := kubeletClient(t, f.socket)
	typed := podstest.ConnectClient(t, f.socket)
	view := func(name, kind string) float64 {
		return podstest.MetricValue(t, reg, name, map[string]string{"view": kind})
	}
	const m = "status.phase"
	if _, err := typed.ListPods(ctx(t), withMask(connect.NewRequest(&podsv1alpha1.PodListRequest{}), m)); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.ListPods(ctx(t), withMask(connect.NewRequest(&v1alpha1.ListPodsRequest{}), m)); err != nil {
		t.Fatal(err)
	}
	if computes, hits := view("podsapi_view_computes_total", "list"), view("podsapi_view_cache_hits_total", "list"); computes != 1 || hits != 1 {
		t.Fatalf("one list per wire: %v computes and %v hits, want 1 and 1", computes, hits)
	}

	tw, err := typed.WatchPods(ctx(t), withMask(connect.NewRequest(&podsv1alpha1.PodWatchRequest{}), m))
	if err != nil {
		t.Fatal(err)
	}
	defer tw.Close()
	kw, err := kc.WatchPods(ctx(t), withMask(connect.NewRequest(&v1alpha1.WatchPodsRequest{}), m))
	if err != nil {
		t.Fatal(err)
	}
	defer kw.Close()
	for range len(pods) + 1 {
		if !tw.Receive() {
			t.Fatal(tw.Err())
		}
		kubeletEvent(t, kw)
	}
	encodes := podstest.MetricValue(t, reg, "podsapi_pod_encodes_total", nil)
	masks := view("podsapi_view_computes_total", "mask")
	events := view("podsapi_view_computes_total", "watch")
	p := pods[0].DeepCopy()
	p.Status.Phase = corev1.PodFailed
	f.store.Upsert(p)
	if !tw.Receive() {
		t.Fatal(tw.Err())
	}
	ev := kubeletEvent(t, kw)
	if got := decodePod(t, ev.GetPod()); ev.GetType() != v1alpha1.EventType_MODIFIED || got.Status.Phase != corev1.PodFailed || got.UID != p.UID {
		t.Fatalf("kubelet event %v %s %s, want MODIFIED %s Failed", ev.GetType(), got.UID, got.Status.Phase, p.UID)
	}
	if got := podstest.MetricValue(t, reg, "podsapi_pod_encodes_total", nil) - encodes; got != 1 {
		t.Errorf("one change watched on both wires: %v pod encodes, want 1", got)
	}
	if got := view("podsapi_view_computes_total", "mask") - masks; got != 1 {
		t.Errorf("one change watched on both wires with one mask: %v masked views, want 1", got)
	}
	if got := view("podsapi_view_computes_total", "watch") - events; got != 2 {
		t.Errorf("one change watched on both wires: %v encoded events, want 2 (one per wire)", got)
	}
	for name, want := range map[string]float64{"kubelet_pod_requests_list_total": 2, "kubelet_pod_requests_total": 2} {
		if got := podstest.MetricValue(t, reg, name, map[string]string{"server_api_version": "v1alpha1", "status_code": "OK"}); got != want {
			t.Errorf("%s{OK} = %v, want %v (one ListPods per wire)", name, got, want)
		}
	}
}

// TestKubeletWireJSON checks that the kubelet's wire also answers the
// Connect protocol with JSON, pods as base64, for curl.
func TestKubeletWireJSON(t *testing.T) {
	f := start(t, server.Config{Limits: server.LimitsConfig{QPS: -1}}, false, podstest.SamplePods()...)
	req, _ := http.NewRequestWithContext(ctx(t), http.MethodPost, h2c.BaseURL+v1alpha1connect.PodsListPodsProcedure, bytes.NewReader([]byte("{}")))
	req.Header.Set("Content-Type", "application/json")
	resp, err := podstest.HTTPClient(t, f.socket).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	body.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body.Bytes(), []byte(`"pods":["`)) {
		t.Errorf("JSON ListPods: %s %s", resp.Status, body.String())
	}
}
