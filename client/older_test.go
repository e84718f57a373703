package client_test

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/client"
	k8sv1 "github.com/podsapi/podsapi/gen/k8s.io/api/core/v1"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
)

// olderPodsapi is the typed service of a podsapi from before selectors and
// revisions: it ignores the request's fields, lists every pod without a
// revision, and watches with a snapshot then scripted MODIFIED events.
type olderPodsapi struct {
	podsv1alpha1connect.UnimplementedPodsHandler
	pods    []*corev1.Pod
	changes []*corev1.Pod
}

func toProto(t *testing.T, pod *corev1.Pod) *k8sv1.Pod {
	b, err := pod.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	p := &k8sv1.Pod{}
	if err := proto.Unmarshal(b, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func (o *olderPodsapi) serve(t *testing.T) string {
	mux := http.NewServeMux()
	mux.Handle(podsv1alpha1connect.NewPodsHandler(&olderHandler{o, t}))
	return serveMux(t, mux)
}

type olderHandler struct {
	*olderPodsapi
	t *testing.T
}

func (h *olderHandler) ListPods(context.Context, *connect.Request[podsv1alpha1.PodListRequest]) (*connect.Response[podsv1alpha1.PodListResponse], error) {
	res := &podsv1alpha1.PodListResponse{}
	for _, p := range h.pods {
		res.Pods = append(res.Pods, toProto(h.t, p))
	}
	return connect.NewResponse(res), nil
}

func (h *olderHandler) WatchPods(ctx context.Context, _ *connect.Request[podsv1alpha1.PodWatchRequest], stream *connect.ServerStream[podsv1alpha1.PodWatchResponse]) error {
	send := func(typ podsv1alpha1.EventType, p *corev1.Pod) error {
		ev := &podsv1alpha1.PodWatchResponse{Type: typ}
		if p != nil {
			ev.Pod = toProto(h.t, p)
		}
		return stream.Send(ev)
	}
	for _, p := range h.pods {
		if err := send(podsv1alpha1.EventType_EVENT_TYPE_ADDED, p); err != nil {
			return err
		}
	}
	if err := send(podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE, nil); err != nil {
		return err
	}
	for _, p := range h.changes {
		if err := send(podsv1alpha1.EventType_EVENT_TYPE_MODIFIED, p); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return nil
}

// TestSelectorsOnOlderPodsapi checks that against a typed server without
// selectors (no revisions in its responses) the client filters itself,
// with the API server's watch semantics.
func TestSelectorsOnOlderPodsapi(t *testing.T) {
	pods := selectorPods() // web-1 tier=web, web-2 tier=cache, dns-0 tier=web
	in := pods[1].DeepCopy()
	in.Labels["tier"] = "web"
	out := pods[0].DeepCopy()
	out.Labels["tier"] = "cache"
	mod := pods[2].DeepCopy()
	mod.Status.Phase = corev1.PodFailed
	older := &olderPodsapi{pods: pods, changes: []*corev1.Pod{in, out, out, mod}}
	c := dialWire(t, older.serve(t), client.WirePodsAPI)
	ctx := testCtx(t)

	got, rev, err := c.ListRevision(ctx, clientOpts("tier=web")...)
	if err != nil {
		t.Fatal(err)
	}
	if rev != "" || !slices.Equal(names(got), []string{"default/web-1", "kube-system/dns-0"}) {
		t.Fatalf("List = %q at %q, want web-1 and dns-0 without a revision", names(got), rev)
	}
	w, err := c.Watch(ctx, clientOpts("tier=web")...)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var evs []string
	for len(evs) < 6 {
		ev := next(t, w)
		s := ev.Type.String()
		if ev.Pod != nil {
			s += " " + key(ev.Pod)
		}
		evs = append(evs, s)
	}
	want := []string{"ADDED default/web-1", "ADDED kube-system/dns-0", "SYNCED", "ADDED default/web-2", "DELETED default/web-1", "MODIFIED kube-system/dns-0"}
	if !slices.Equal(evs, want) {
		t.Fatalf("events %q, want %q", evs, want)
	}

	// With a field mask, which may hide what the selectors read: the
	// client selects whole pods, then masks them.
	masked := append(clientOpts("tier=web"), client.WithFields("status.phase"))
	got, _, err = c.ListRevision(ctx, masked...)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Labels != nil || got[0].Name != "web-1" || got[0].UID == "" || got[1].Status.Phase != corev1.PodRunning {
		t.Fatalf("masked List = %+v, want the phases of web-1 and dns-0", got)
	}
	mw, err := c.Watch(ctx, masked...)
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Close()
	for _, w := range want {
		ev := next(t, mw)
		s := ev.Type.String()
		if ev.Pod != nil {
			s += " " + key(ev.Pod)
			if ev.Pod.Labels != nil || ev.Pod.UID == "" {
				t.Errorf("masked event %s: labels %v, UID %q; want only the identity and phase", s, ev.Pod.Labels, ev.Pod.UID)
			}
		}
		if s != w {
			t.Fatalf("masked event %s, want %s", s, w)
		}
	}
}

// clientOpts returns the options of a label selector.
func clientOpts(selector string) []client.CallOption {
	return []client.CallOption{client.WithLabelSelector(selector)}
}
