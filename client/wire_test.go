package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	"github.com/podsapi/podsapi/client"
	"github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1/v1alpha1connect"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/test/podstest"
	"github.com/podsapi/podsapi/test/sourcetest"
)

// startKubelet serves pods on a fresh socket with the kubelet's wire only,
// as a kubelet does: no reflection, no typed service.
func startKubelet(t *testing.T, pods ...*corev1.Pod) *sourcetest.FakeKubelet {
	t.Helper()
	return sourcetest.NewFakeKubelet(t, podstest.SocketPath(t), pods...)
}

// dialWire returns a client of socket speaking wire, closed at the end of
// the test.
func dialWire(t *testing.T, socket string, wire client.Wire) *client.Client {
	t.Helper()
	c, err := client.New(socket, client.WithWire(wire))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// errorKubelet is a kubelet's Pods service that fails every call with code.
type errorKubelet struct {
	v1alpha1connect.UnimplementedPodsHandler
	code connect.Code
}

func (k errorKubelet) err() error {
	return connect.NewError(k.code, errors.New("planted "+k.code.String()))
}

func (k errorKubelet) ListPods(context.Context, *connect.Request[v1alpha1.ListPodsRequest]) (*connect.Response[v1alpha1.ListPodsResponse], error) {
	return nil, k.err()
}

func (k errorKubelet) GetPod(context.Context, *connect.Request[v1alpha1.GetPodRequest]) (*connect.Response[v1alpha1.GetPodResponse], error) {
	return nil, k.err()
}

func (k errorKubelet) WatchPods(context.Context, *connect.Request[v1alpha1.WatchPodsRequest], *connect.ServerStream[v1alpha1.WatchPodsEvent]) error {
	return k.err()
}

// serveMux serves mux with gRPC over h2c on a fresh socket until the end of
// the test, and returns the socket.
func serveMux(t *testing.T, mux *http.ServeMux) string {
	t.Helper()
	path := podstest.SocketPath(t)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, Protocols: protocols, ReadHeaderTimeout: testTimeout}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return path
}

// kubeletMux returns a mux serving h as the kubelet's wire and, if names
// are given, gRPC reflection listing them.
func kubeletMux(h v1alpha1connect.PodsHandler, reflected ...string) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle(v1alpha1connect.NewPodsHandler(h))
	if len(reflected) > 0 {
		r := grpcreflect.NewStaticReflector(reflected...)
		mux.Handle(grpcreflect.NewHandlerV1(r))
		mux.Handle(grpcreflect.NewHandlerV1Alpha(r))
	}
	return mux
}

// TestKubeletWire lists, gets and watches a socket that serves only the
// kubelet's wire, with the default WireAuto.
func TestKubeletWire(t *testing.T) {
	pods := samplePods()
	k := startKubelet(t, pods[0], pods[2], pods[1]) // listed in UID order
	c := dial(t, k.Path())
	ctx := testCtx(t)

	if w, err := c.Wire(ctx); w != client.WireKubelet || err != nil {
		t.Fatalf("Wire = %v, %v; want kubelet", w, err)
	}
	list, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(pods) {
		t.Fatalf("List returned %d pods, want %d", len(list), len(pods))
	}
	for i := range pods { // sorted by namespace, name and UID, as podsapi lists
		if d := podDiff(list[i], pods[i]); d != "" {
			t.Errorf("List: %s", d)
		}
	}
	for _, p := range pods {
		got, err := c.Get(ctx, p.UID)
		if err != nil {
			t.Fatal(err)
		}
		if d := podDiff(got, p); d != "" {
			t.Errorf("Get: %s", d)
		}
	}
	_, err = c.Get(ctx, "no-such-uid")
	if connect.CodeOf(err) != connect.CodeNotFound || !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("Get of an unknown UID = %v, want NOT_FOUND wrapping ErrNotFound", err)
	}

	w, err := c.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var snapshot []*corev1.Pod
	for range pods {
		ev := next(t, w)
		if ev.Type != client.Added {
			t.Fatalf("snapshot event %v, want ADDED", ev.Type)
		}
		snapshot = append(snapshot, ev.Pod)
	}
	expect(t, next(t, w), client.Synced, nil)
	sortByName(snapshot)
	for i := range pods {
		if d := podDiff(snapshot[i], pods[i]); d != "" {
			t.Errorf("snapshot: %s", d)
		}
	}
	changed := pods[0].DeepCopy()
	changed.ResourceVersion = "2"
	changed.Status.Phase = corev1.PodFailed
	k.Set(changed)
	expect(t, next(t, w), client.Modified, changed)
	added := podstest.Pod("default", "web-3", 4)
	k.Set(added)
	expect(t, next(t, w), client.Added, added)
	k.Remove(pods[1])
	expect(t, next(t, w), client.Deleted, identity(pods[1]))

	k.DropStreams()
	if _, err := w.Next(); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("after the stream was dropped Next = %v, want UNAVAILABLE", err)
	}
}

// identity returns a pod with only the namespace, name and UID of p: what a
// kubelet's DELETED event carries.
func identity(p *corev1.Pod) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID}}
}

// sortByName sorts pods by namespace, name and UID.
func sortByName(pods []*corev1.Pod) {
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		return strings.Compare(a.Namespace+"/"+a.Name+"/"+string(a.UID), b.Namespace+"/"+b.Name+"/"+string(b.UID))
	})
}

// TestKubeletWireBadEvents checks the events a kubelet must not send.
func TestKubeletWireBadEvents(t *testing.T) {
	tests := []struct {
		name string
		ev   *v1alpha1.WatchPodsEvent
		want string
	}{
		{"Unspecified", &v1alpha1.WatchPodsEvent{Pod: []byte{}}, "unknown type 0"},
		{"UnknownType", &v1alpha1.WatchPodsEvent{Type: 9}, "unknown type 9"},
		{"AddedWithoutPod", &v1alpha1.WatchPodsEvent{Type: v1alpha1.EventType_ADDED}, "type 1 without a pod"},
		{"NotAPod", &v1alpha1.WatchPodsEvent{Type: v1alpha1.EventType_MODIFIED, Pod: []byte{0xff, 0xff}}, "decode pod"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := startKubelet(t)
			w, err := dial(t, k.Path()).Watch(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			expect(t, next(t, w), client.Synced, nil)
			k.SendRaw(tt.ev)
			if _, err := w.Next(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Next = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestKubeletWireErrors checks that the errors of a kubelet map to the
// client's codes and sentinel errors, as podsapi's do.
func TestKubeletWireErrors(t *testing.T) {
	k := startKubelet(t, samplePods()...)
	c := dial(t, k.Path())
	ctx := testCtx(t)
	failing := func(code connect.Code) *client.Client {
		return dial(t, serveMux(t, kubeletMux(errorKubelet{code: code})))
	}
	unsynced, limited := failing(connect.CodeFailedPrecondition), failing(connect.CodeResourceExhausted)
	// podsapi's own kubelet wire.
	ours := podstest.Start(t, newStore(false, samplePods()...), server.Config{}).SocketPath()
	oursUnsynced := podstest.Start(t, newStore(true), server.Config{}).SocketPath()
	oursWire, oursUnsyncedWire := dialWire(t, ours, client.WireKubelet), dialWire(t, oursUnsynced, client.WireKubelet)
	tests := []struct {
		name     string
		call     func() error
		code     connect.Code
		sentinel error
	}{
		{"ListNotSynced", func() error { _, err := unsynced.List(ctx); return err }, connect.CodeFailedPrecondition, client.ErrNotSynced},
		{"GetNotSynced", func() error { _, err := unsynced.Get(ctx, "uid"); return err }, connect.CodeFailedPrecondition, client.ErrNotSynced},
		{"WatchNotSynced", func() error { _, err := unsynced.Watch(ctx); return err }, connect.CodeFailedPrecondition, client.ErrNotSynced},
		{"ListRateLimited", func() error { _, err := limited.List(ctx); return err }, connect.CodeResourceExhausted, client.ErrRateLimited},
		{"GetRateLimited", func() error { _, err := limited.Get(ctx, "uid"); return err }, connect.CodeResourceExhausted, client.ErrRateLimited},
		{"WatchFellBehind", func() error { _, err := limited.Watch(ctx); return err }, connect.CodeResourceExhausted, client.ErrFellBehind},
		{"GetUnknownUID", func() error { _, err := c.Get(ctx, "no-such-uid"); return err }, connect.CodeNotFound, client.ErrNotFound},
		{"BadFieldMask", func() error { _, err := c.List(ctx, client.WithFields("status.nope")); return err }, connect.CodeInvalidArgument, nil},
		{"BadFieldMaskGet", func() error {
			_, err := c.Get(ctx, samplePods()[0].UID, client.WithFields("metadata.labels.app"))
			return err
		}, connect.CodeInvalidArgument, nil},
		{"BadFieldMaskWatch", func() error { _, err := c.Watch(ctx, client.WithFields(" , ")); return err }, connect.CodeInvalidArgument, nil},
		{"PodsapiListNotSynced", func() error { _, err := oursUnsyncedWire.List(ctx); return err }, connect.CodeFailedPrecondition, client.ErrNotSynced},
		{"PodsapiWatchNotSynced", func() error { _, err := oursUnsyncedWire.Watch(ctx); return err }, connect.CodeFailedPrecondition, client.ErrNotSynced},
		{"PodsapiGetUnknownUID", func() error { _, err := oursWire.Get(ctx, "no-such-uid"); return err }, connect.CodeNotFound, client.ErrNotFound},
		{"PodsapiBadFieldMask", func() error { _, err := oursWire.List(ctx, client.WithFields("status.nope")); return err }, connect.CodeInvalidArgument, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if got := connect.CodeOf(err); got != tt.code {
				t.Fatalf("error %v has code %v, want %v", err, got, tt.code)
			}
			for _, s := range []error{client.ErrNotSynced, client.ErrNotFound, client.ErrRateLimited, client.ErrFellBehind} {
				if errors.Is(err, s) != (s == tt.sentinel) {
					t.Errorf("errors.Is(%v, %v) = %v", err, s, !(s == tt.sentinel))
				}
			}
		})
	}
}

// wirePair is a client of podsapi's typed wire and a client of a kubelet's
// wire that serve the same pods, and the function that changes a pod for
// both.
type wirePair struct {
	typed, kubelet *client.Client
	set            func(*corev1.Pod)
}

// wirePairs start the pairs of servers TestFieldMaskSameOnBothWires and
// TestSelectorsSameOnBothWires compare, without rate limits.
var wirePairs = []struct {
	name  string
	start func(t *testing.T, pods []*corev1.Pod) wirePair
}{
	{"FakeKubelet", func(t *testing.T, pods []*corev1.Pod) wirePair {
		st := newStore(false, pods...)
		k := startKubelet(t, pods...)
		set := func(p *corev1.Pod) { st.Upsert(p); k.Set(p) }
		return wirePair{startClient(t, st, server.Config{Limits: server.LimitsConfig{QPS: -1}}), dial(t, k.Path()), set}
	}},
	{"PodsapiKubeletWire", func(t *testing.T, pods []*corev1.Pod) wirePair {
		st := newStore(false, pods...)
		socket := podstest.Start(t, st, server.Config{Limits: server.LimitsConfig{QPS: -1}}).SocketPath()
		return wirePair{dialWire(t, socket, client.WirePodsAPI), dialWire(t, socket, client.WireKubelet), st.Upsert}
	}},
}

// TestFieldMaskSameOnBothWires checks that a client gets the same masked
// pods and events from podsapi's typed wire, which applies masks, as from
// the kubelet's wire, which a kubelet serves ignoring masks.
func TestFieldMaskSameOnBothWires(t *testing.T) {
	for _, pair := range wirePairs {
		t.Run(pair.name, func(t *testing.T) { testFieldMaskSameOnBothWires(t, pair.start) })
	}
}

func testFieldMaskSameOnBothWires(t *testing.T, start func(t *testing.T, pods []*corev1.Pod) wirePair) {
	tests := []struct {
		name   string
		paths  []string
		hidden bool // whether the mask hides the test's change of a pod
	}{
		{"WholePods", nil, false},
		{"NameAndPhase", []string{"metadata.name", "status.phase"}, false},
		{"Repeated", []string{"status.podIPs", "status.containerStatuses.ready", "spec.containers.name"}, false},
		{"Labels", []string{"metadata.labels", "metadata.uid"}, true},
		{"Deep", []string{"spec.volumes.volumeSource.emptyDir", "metadata.creationTimestamp.seconds"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			paths := tt.paths
			pods := samplePods()
			pair := start(t, pods)
			typed, kubelet := pair.typed, pair.kubelet
			ctx := testCtx(t)
			mask := client.WithFields(paths...)
			want, err := typed.List(ctx, mask)
			if err != nil {
				t.Fatal(err)
			}
			got, err := kubelet.List(ctx, mask)
			if err != nil {
				t.Fatal(err)
			}
			samePods(t, "List", got, want)
			for _, p := range pods {
				want, err := typed.Get(ctx, p.UID, mask)
				if err != nil {
					t.Fatal(err)
				}
				got, err := kubelet.Get(ctx, p.UID, mask)
				if err != nil {
					t.Fatal(err)
				}
				samePods(t, "Get", []*corev1.Pod{got}, []*corev1.Pod{want})
			}

			tw, err := typed.Watch(ctx, mask)
			if err != nil {
				t.Fatal(err)
			}
			defer tw.Close()
			kw, err := kubelet.Watch(ctx, mask)
			if err != nil {
				t.Fatal(err)
			}
			defer kw.Close()
			samePods(t, "Watch snapshot", snapshot(t, kw), snapshot(t, tw))
			// A change that some masks hide (podsapi then sends no event),
			// then a new pod, which every watch sees.
			changed := pods[1].DeepCopy()
			changed.ResourceVersion = "2"
			changed.Status.Phase = corev1.PodSucceeded
			changed.Status.PodIPs = nil
			added := podstest.Pod("default", "web-9", 9)
			pair.set(changed)
			pair.set(added)
			wantEvents, gotEvents := untilAdded(t, tw), untilAdded(t, kw)
			if len(gotEvents) != len(wantEvents) {
				t.Fatalf("%d events on the kubelet wire, want %d", len(gotEvents), len(wantEvents))
			}
			for i := range wantEvents {
				if gotEvents[i].Type != wantEvents[i].Type {
					t.Fatalf("event %d is %v on the kubelet wire, want %v", i, gotEvents[i].Type, wantEvents[i].Type)
				}
				samePods(t, "Watch", []*corev1.Pod{gotEvents[i].Pod}, []*corev1.Pod{wantEvents[i].Pod})
			}
			if hidden := len(wantEvents) == 1; hidden != tt.hidden {
				t.Fatalf("%d events: the change is hidden: %v, want %v", len(wantEvents), hidden, tt.hidden)
			}
		})
	}
}

// untilAdded returns the events of w up to its next Added event.
func untilAdded(t *testing.T, w *client.Watcher) []client.Event {
	t.Helper()
	var evs []client.Event
	for {
		ev := next(t, w)
		evs = append(evs, ev)
		if ev.Type == client.Added {
			return evs
		}
	}
}

// snapshot returns the pods of the snapshot of w, up to its Synced event,
// sorted by namespace, name and UID.
func snapshot(t *testing.T, w *client.Watcher) []*corev1.Pod {
	t.Helper()
	var pods []*corev1.Pod
	for {
		ev := next(t, w)
		if ev.Type == client.Synced {
			sortByName(pods)
			return pods
		}
		pods = append(pods, ev.Pod)
	}
}

// samePods fails the test unless got and want are semantically equal.
func samePods(t *testing.T, what string, got, want []*corev1.Pod) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d pods, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !equality.Semantic.DeepEqual(got[i], want[i]) {
			t.Errorf("%s: pod %d differs on the kubelet wire: %s", what, i, podDiff(got[i], want[i]))
		}
	}
}

// TestWireDetection checks which wire WireAuto detects.
func TestWireDetection(t *testing.T) {
	tests := []struct {
		name   string
		socket func(t *testing.T) string
		want   client.Wire
	}{
		{"Podsapi", func(t *testing.T) string {
			return podstest.Start(t, newStore(false), server.Config{}).SocketPath()
		}, client.WirePodsAPI},
		{"KubeletWithoutReflection", func(t *testing.T) string { return startKubelet(t).Path() }, client.WireKubelet},
		{"ReflectionWithoutTypedService", func(t *testing.T) string {
			return serveMux(t, kubeletMux(errorKubelet{code: connect.CodeInternal}, v1alpha1connect.PodsName))
		}, client.WireKubelet},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, tt.socket(t))
			if w, err := c.Wire(testCtx(t)); w != tt.want || err != nil {
				t.Fatalf("Wire = %v, %v; want %v", w, err, tt.want)
			}
		})
	}
}

// TestWireDetectionCostsNoToken checks that detecting the wire leaves the
// rate limit's only token to the first call.
func TestWireDetectionCostsNoToken(t *testing.T) {
	c := startClient(t, newStore(false, samplePods()...), server.Config{Limits: server.LimitsConfig{QPS: 0.001, Burst: 1}})
	ctx := testCtx(t)
	if w, err := c.Wire(ctx); w != client.WirePodsAPI || err != nil {
		t.Fatalf("Wire = %v, %v; want podsapi", w, err)
	}
	if _, err := c.List(ctx); err != nil {
		t.Fatalf("List after the detection: %v", err)
	}
	if _, err := c.List(ctx); !errors.Is(err, client.ErrRateLimited) {
		t.Fatalf("second List = %v, want ErrRateLimited", err)
	}
}

// TestWireDetectionIsKept checks that the detected wire is kept until a
// call finds it unimplemented, and that a failed detection is not kept.
func TestWireDetectionIsKept(t *testing.T) {
	pods := samplePods()
	socket := podstest.SocketPath(t)
	ctx := testCtx(t)
	c := dial(t, socket)
	if _, err := c.Wire(ctx); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("Wire with no server = %v, want UNAVAILABLE", err)
	}
	srv := serve(t, newStore(false, pods...), socket)
	if w, err := c.Wire(ctx); w != client.WirePodsAPI || err != nil {
		t.Fatalf("Wire = %v, %v; want podsapi", w, err)
	}
	srv.stop(t)
	c.Close()
	sourcetest.NewFakeKubelet(t, socket, pods...)
	// The client still speaks podsapi's wire, which a kubelet does not serve.
	if _, err := c.List(ctx); connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Fatalf("List on a kubelet after detecting podsapi = %v, want UNIMPLEMENTED", err)
	}
	got, err := c.List(ctx)
	if err != nil || len(got) != len(pods) {
		t.Fatalf("List after UNIMPLEMENTED = %d pods, %v; want %d pods", len(got), err, len(pods))
	}
	if w, err := c.Wire(ctx); w != client.WireKubelet || err != nil {
		t.Fatalf("Wire = %v, %v; want kubelet", w, err)
	}
}

// TestWithWire checks that an explicit wire is spoken without detection.
func TestWithWire(t *testing.T) {
	pods := samplePods()
	k := startKubelet(t, pods...)
	// A server whose reflection claims the typed service it does not serve:
	// WireAuto picks the typed wire, WireKubelet is not misled.
	podsapi := podstest.Start(t, newStore(false, pods...), server.Config{}).SocketPath()
	liar := serveMux(t, kubeletMux(listKubelet{pods: encode(t, pods)}, podsv1alpha1connect.PodsName, v1alpha1connect.PodsName))
	tests := []struct {
		name   string
		socket string
		wire   client.Wire
		code   connect.Code // of List
	}{
		{"KubeletOnKubelet", k.Path(), client.WireKubelet, 0},
		{"KubeletOnPodsapi", podsapi, client.WireKubelet, 0},
		{"PodsAPIOnPodsapi", podsapi, client.WirePodsAPI, 0},
		{"PodsAPIOnKubelet", k.Path(), client.WirePodsAPI, connect.CodeUnimplemented},
		{"KubeletOnMisleadingReflection", liar, client.WireKubelet, 0},
		{"AutoOnMisleadingReflection", liar, client.WireAuto, connect.CodeUnimplemented},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dialWire(t, tt.socket, tt.wire)
			ctx := testCtx(t)
			got, err := c.List(ctx)
			if (tt.code == 0) != (err == nil) || err != nil && connect.CodeOf(err) != tt.code {
				t.Fatalf("List = %v, want code %v", err, tt.code)
			}
			if err == nil && len(got) != len(pods) {
				t.Fatalf("List returned %d pods, want %d", len(got), len(pods))
			}
			if tt.wire != client.WireAuto {
				if w, err := c.Wire(ctx); w != tt.wire || err != nil {
					t.Fatalf("Wire = %v, %v; want %v", w, err, tt.wire)
				}
			}
		})
	}
	if _, err := client.New(k.Path(), client.WithWire(client.Wire(7))); err == nil {
		t.Fatal("New accepted Wire(7)")
	}
}

// listKubelet is a kubelet's Pods service that serves only ListPods.
type listKubelet struct {
	v1alpha1connect.UnimplementedPodsHandler
	pods [][]byte
}

func (k listKubelet) ListPods(context.Context, *connect.Request[v1alpha1.ListPodsRequest]) (*connect.Response[v1alpha1.ListPodsResponse], error) {
	return connect.NewResponse(&v1alpha1.ListPodsResponse{Pods: k.pods}), nil
}

// encode returns the protobuf encodings of pods.
func encode(t *testing.T, pods []*corev1.Pod) [][]byte {
	t.Helper()
	var out [][]byte
	for _, p := range pods {
		b, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func TestParseWire(t *testing.T) {
	tests := []struct {
		in      string
		want    client.Wire
		wantErr bool
	}{
		{"auto", client.WireAuto, false},
		{"podsapi", client.WirePodsAPI, false},
		{"kubelet", client.WireKubelet, false},
		{"", client.WireAuto, true},
		{"Kubelet", client.WireAuto, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.in), func(t *testing.T) {
			got, err := client.ParseWire(tt.in)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Fatalf("ParseWire(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
			if err == nil && got.String() != tt.in {
				t.Fatalf("String() = %q, want %q", got.String(), tt.in)
			}
		})
	}
}

// TestCacheOnKubeletWire runs a cache over a kubelet's wire, whose DELETED
// events carry only the pod's identity: OnDelete still gets the last known
// state.
func TestCacheOnKubeletWire(t *testing.T) {
	pods := samplePods()
	k := startKubelet(t, pods...)
	cache := client.NewCache(dial(t, k.Path()), client.WithFields("metadata", "status.phase"), client.WithBackoff(time.Millisecond, 10*time.Millisecond))
	var deleted *corev1.Pod // set before the recorder's handler records the call
	cache.OnDelete(func(p *corev1.Pod) { deleted = p })
	r := newRecorder().register(cache)
	runCache(t, cache)
	if err := cache.WaitForSync(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	var adds []string // in the kubelet's order
	for range pods {
		adds = append(adds, <-r.calls)
	}
	slices.Sort(adds)
	if want := []string{"add default/web-1", "add default/web-2", "add kube-system/dns-0"}; !slices.Equal(adds, want) {
		t.Fatalf("handler calls %q, want %q", adds, want)
	}
	k.Set(withRV(pods[0], "2", corev1.PodFailed))
	r.expectCalls(t, "update default/web-1 1->2")
	k.Remove(pods[2])
	r.expectCalls(t, "delete kube-system/dns-0")
	if deleted.Status.Phase != pods[2].Status.Phase || deleted.ResourceVersion != "1" {
		t.Fatalf("OnDelete got %+v, want the last known state of kube-system/dns-0", deleted)
	}
	if p, ok := cache.Get(pods[0].UID); !ok || p.Status.Phase != corev1.PodFailed || len(p.Spec.Containers) != 0 {
		t.Fatalf("cached pod %v, %v; want phase Failed and no spec (masked)", p, ok)
	}
	// A change while the kubelet restarts is reconciled on the new watch.
	k.Stop()
	k.Set(withRV(pods[1], "3", corev1.PodSucceeded))
	k.Start()
	r.expectCalls(t, "update default/web-2 1->3")
}
