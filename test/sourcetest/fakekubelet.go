package sourcetest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	"github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1/v1alpha1connect"
)

// FakeKubelet serves a fake of the kubelet's own Pods API (package
// v1alpha1, pods as protobuf bytes) with connect-go over h2c on a UNIX
// socket, like a kubelet with the PodsAPI feature gate does. Tests change its
// pods with Set and Remove, which open watches see as ADDED, MODIFIED and
// DELETED events, end open watches with DropStreams, and restart it with Stop
// and Start. Make one with NewFakeKubelet; it is safe for concurrent use.
type FakeKubelet struct {
	t    testing.TB
	path string

	mu       sync.Mutex
	pods     map[types.UID][]byte
	watchers map[*fakeWatcher]struct{}
	watches  int           // WatchPods calls that sent their snapshot.
	changed  chan struct{} // Closed and replaced when watches or watchers change.
	gate     chan struct{} // Closed unless HoldInitialSync is in effect.
	srv      *http.Server
	served   chan struct{} // Closed when srv.Serve returned.
	handlers sync.WaitGroup
}

// fakeWatcher is one open WatchPods stream.
type fakeWatcher struct {
	events chan *v1alpha1.WatchPodsEvent
	drop   chan struct{}
}

// NewFakeKubelet starts a FakeKubelet on the UNIX socket path, serving pods,
// and stops it when the test ends.
func NewFakeKubelet(t testing.TB, path string, pods ...*corev1.Pod) *FakeKubelet {
	t.Helper()
	gate := make(chan struct{})
	close(gate)
	f := &FakeKubelet{
		t:        t,
		path:     path,
		pods:     make(map[types.UID][]byte),
		watchers: make(map[*fakeWatcher]struct{}),
		changed:  make(chan struct{}),
		gate:     gate,
	}
	for _, p := range pods {
		f.pods[p.UID] = marshal(t, p)
	}
	f.Start()
	t.Cleanup(f.Stop)
	return f
}

// Path returns the socket path.
func (f *FakeKubelet) Path() string { return f.path }

// Start serves on the socket. It fails the test if the FakeKubelet is
// serving already or the socket cannot be created.
func (f *FakeKubelet) Start() {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.srv != nil {
		f.t.Fatalf("FakeKubelet.Start: already serving")
	}
	l, err := net.Listen("unix", f.path)
	if err != nil {
		f.t.Fatalf("FakeKubelet.Start: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle(v1alpha1connect.NewPodsHandler(fakeHandler{f}))
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	f.srv = &http.Server{Handler: mux, Protocols: protocols, ReadHeaderTimeout: WaitTimeout}
	f.served = make(chan struct{})
	go func(srv *http.Server, served chan struct{}) {
		defer close(served)
		_ = srv.Serve(l)
	}(f.srv, f.served)
}

// Stop stops serving: the socket is removed, every connection is closed, and
// Stop waits for every handler to return. Stopping a stopped FakeKubelet does
// nothing.
func (f *FakeKubelet) Stop() {
	f.mu.Lock()
	srv, served := f.srv, f.served
	f.srv = nil
	f.mu.Unlock()
	if srv == nil {
		return
	}
	_ = srv.Close()
	f.DropStreams()
	wait(f.t, "the FakeKubelet to stop serving", served)
	done := make(chan struct{})
	go func() {
		f.handlers.Wait()
		close(done)
	}()
	wait(f.t, "the FakeKubelet's handlers to return", done)
}

// Set adds pod, or replaces the pod with its UID: open watches get an ADDED
// or a MODIFIED event.
func (f *FakeKubelet) Set(pod *corev1.Pod) {
	raw := marshal(f.t, pod)
	f.mu.Lock()
	defer f.mu.Unlock()
	typ := v1alpha1.EventType_MODIFIED
	if _, ok := f.pods[pod.UID]; !ok {
		typ = v1alpha1.EventType_ADDED
	}
	f.pods[pod.UID] = raw
	f.broadcast(&v1alpha1.WatchPodsEvent{Type: typ, Pod: raw})
}

// Remove removes pod: open watches get a DELETED event that carries only
// the pod's name, namespace and UID, as the kubelet sends it.
func (f *FakeKubelet) Remove(pod *corev1.Pod) {
	stub := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID}}
	raw := marshal(f.t, stub)
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.pods, pod.UID)
	f.broadcast(&v1alpha1.WatchPodsEvent{Type: v1alpha1.EventType_DELETED, Pod: raw})
}

// SendRaw sends ev to every open watch as it is, without changing the pods:
// for events a kubelet should not send.
func (f *FakeKubelet) SendRaw(ev *v1alpha1.WatchPodsEvent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.broadcast(ev)
}

// DropStreams ends every open watch with UNAVAILABLE.
func (f *FakeKubelet) DropStreams() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for w := range f.watchers {
		close(w.drop)
		delete(f.watchers, w)
	}
	f.notify()
}

// HoldInitialSync makes watches that start from now on send their snapshot
// but not the INITIAL_SYNC_COMPLETE event, until ReleaseInitialSync.
func (f *FakeKubelet) HoldInitialSync() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gate = make(chan struct{})
}

// ReleaseInitialSync lets the watches held by HoldInitialSync go on.
func (f *FakeKubelet) ReleaseInitialSync() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.gate:
	default:
		close(f.gate)
	}
}

// WaitWatches waits until n WatchPods calls in all have sent their snapshot
// (held or not) and are still open or ended, and fails the test otherwise.
func (f *FakeKubelet) WaitWatches(n int) {
	f.t.Helper()
	f.waitFor(fmt.Sprintf("%d watches", n), func() bool { return f.watches >= n })
}

// WaitOpenWatches waits until exactly n watches are open.
func (f *FakeKubelet) WaitOpenWatches(n int) {
	f.t.Helper()
	f.waitFor(fmt.Sprintf("%d open watches", n), func() bool { return len(f.watchers) == n })
}

func (f *FakeKubelet) waitFor(what string, cond func() bool) {
	f.t.Helper()
	bound := WaitBound(f.t)
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		ok, changed := cond(), f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			f.t.Fatalf("timed out after %v waiting for %s", bound, what)
		}
	}
}

// broadcast queues ev for every open watch. f.mu must be held.
func (f *FakeKubelet) broadcast(ev *v1alpha1.WatchPodsEvent) {
	for w := range f.watchers {
		select {
		case w.events <- ev:
		default:
			f.t.Errorf("FakeKubelet: a watcher's queue is full; the test sends too many events")
		}
	}
}

// notify wakes waiters. f.mu must be held.
func (f *FakeKubelet) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// fakeHandler implements the Pods service of a FakeKubelet.
type fakeHandler struct{ f *FakeKubelet }

var _ v1alpha1connect.PodsHandler = fakeHandler{}

func (h fakeHandler) WatchPods(ctx context.Context, _ *connect.Request[v1alpha1.WatchPodsRequest], stream *connect.ServerStream[v1alpha1.WatchPodsEvent]) error {
	f := h.f
	f.handlers.Add(1)
	defer f.handlers.Done()
	w := &fakeWatcher{events: make(chan *v1alpha1.WatchPodsEvent, 4096), drop: make(chan struct{})}
	f.mu.Lock()
	snapshot := f.sorted()
	gate := f.gate
	f.watchers[w] = struct{}{}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.watchers, w)
		f.notify()
		f.mu.Unlock()
	}()
	for _, raw := range snapshot {
		if err := stream.Send(&v1alpha1.WatchPodsEvent{Type: v1alpha1.EventType_ADDED, Pod: raw}); err != nil {
			return err
		}
	}
	f.mu.Lock()
	f.watches++
	f.notify()
	f.mu.Unlock()
	select {
	case <-gate:
	case <-w.drop:
		return connect.NewError(connect.CodeUnavailable, errors.New("fake kubelet dropped the stream"))
	case <-ctx.Done():
		return nil
	}
	if err := stream.Send(&v1alpha1.WatchPodsEvent{Type: v1alpha1.EventType_INITIAL_SYNC_COMPLETE}); err != nil {
		return err
	}
	for {
		select {
		case ev := <-w.events:
			if err := stream.Send(ev); err != nil {
				return err
			}
		case <-w.drop:
			return connect.NewError(connect.CodeUnavailable, errors.New("fake kubelet dropped the stream"))
		case <-ctx.Done():
			return nil
		}
	}
}

func (h fakeHandler) ListPods(context.Context, *connect.Request[v1alpha1.ListPodsRequest]) (*connect.Response[v1alpha1.ListPodsResponse], error) {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	return connect.NewResponse(&v1alpha1.ListPodsResponse{Pods: h.f.sorted()}), nil
}

func (h fakeHandler) GetPod(_ context.Context, req *connect.Request[v1alpha1.GetPodRequest]) (*connect.Response[v1alpha1.GetPodResponse], error) {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	raw, ok := h.f.pods[types.UID(req.Msg.GetPodUID())]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("pod %q not found", req.Msg.GetPodUID()))
	}
	return connect.NewResponse(&v1alpha1.GetPodResponse{Pod: raw}), nil
}

// sorted returns the encoded pods in UID order. f.mu must be held.
func (f *FakeKubelet) sorted() [][]byte {
	uids := make([]types.UID, 0, len(f.pods))
	for uid := range f.pods {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	out := make([][]byte, 0, len(uids))
	for _, uid := range uids {
		out = append(out, f.pods[uid])
	}
	return out
}

// marshal encodes pod as the kubelet does, with v1.Pod#Marshal.
func marshal(t testing.TB, pod *corev1.Pod) []byte {
	raw, err := pod.Marshal()
	if err != nil {
		t.Fatalf("marshal pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	return raw
}

// wait waits up to WaitBound(t) for ch to be closed, and fails the test
// otherwise.
func wait(t testing.TB, what string, ch <-chan struct{}) {
	t.Helper()
	bound := WaitBound(t)
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		t.Errorf("timed out after %v waiting for %s", bound, what)
	}
}
