package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/errinfo"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1"
	"github.com/podsapi/podsapi/internal/podstest"
	"github.com/podsapi/podsapi/server"
)

// TestWatchOrdering starts watchers while pods change concurrently and checks
// that each sees every change of every pod exactly once, in order, after its
// snapshot: no gap, no duplicate.
func TestWatchOrdering(t *testing.T) {
	const pods, changes = 5, 400
	var initial []*corev1.Pod
	for i := range pods {
		initial = append(initial, podstest.Pod("default", fmt.Sprintf("pod-%d", i), i))
	}
	f := start(t, server.Config{}, false, initial...)
	clients := []apiClient{}
	for _, kind := range clientKinds {
		clients = append(clients, kind.dial(t, f.socket), kind.dial(t, f.socket))
	}

	// The writer gives change k to pod k%pods, with resourceVersion k, so
	// that each pod's versions grow by exactly pods.
	startWatcher := make(map[int]bool) // change after which a watcher starts
	for i := range clients {
		startWatcher[i*changes/len(clients)] = true
	}
	var wg sync.WaitGroup
	results := make([]map[types.UID][]int, len(clients))
	errs := make([]error, len(clients))
	final := make(map[types.UID]int)
	for _, p := range initial {
		final[p.UID] = 1
	}
	next := 0
	for k := 0; k <= changes; k++ {
		if startWatcher[k] {
			i := next
			next++
			w, err := clients[i].Watch(ctx(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			ready := make(chan struct{})
			wg.Go(func() { results[i], errs[i] = collect(w, ready, final, pods*2) })
			<-ready // the watch is registered: it received its first event
		}
		if k == 0 {
			continue
		}
		p := initial[k%pods].DeepCopy()
		p.ResourceVersion = strconv.Itoa(k + 1)
		p.Status.ContainerStatuses[0].RestartCount = int32(k)
		f.store.Upsert(p)
		final[p.UID] = k + 1
	}
	f.store.Upsert(podstest.Pod("zz", "end-marker", 99))
	wg.Wait()
	for i, seen := range results {
		if errs[i] != nil {
			t.Fatalf("watcher %d: %v", i, errs[i])
		}
		for uid, rvs := range seen {
			for j := 1; j < len(rvs); j++ {
				if rvs[j] != rvs[j-1]+pods && !(rvs[j-1] == 1 && rvs[j] <= 1+pods) {
					t.Fatalf("watcher %d, pod %s: versions %v: gap or duplicate at %d", i, uid, rvs, j)
				}
			}
			if last := rvs[len(rvs)-1]; last != final[uid] {
				t.Fatalf("watcher %d, pod %s: last version %d, want %d", i, uid, last, final[uid])
			}
		}
	}
}

// collect reads a watch until the end marker pod is added, and returns the
// resource versions it saw per pod. ready is closed at the first event.
func collect(w watchStream, ready chan struct{}, _ map[types.UID]int, _ int) (map[types.UID][]int, error) {
	seen := make(map[types.UID][]int)
	synced := false
	for first := true; ; first = false {
		ev, err := w.Recv()
		if first {
			close(ready)
		}
		if err != nil {
			return nil, err
		}
		switch ev.GetType() {
		case podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE:
			if synced {
				return nil, fmt.Errorf("second INITIAL_SYNC_COMPLETE")
			}
			synced = true
			continue
		case podsv1alpha1.EventType_EVENT_TYPE_ADDED:
			if synced && ev.GetPod().GetMetadata().GetName() == "end-marker" {
				return seen, nil
			}
		case podsv1alpha1.EventType_EVENT_TYPE_MODIFIED:
			if !synced {
				return nil, fmt.Errorf("MODIFIED before INITIAL_SYNC_COMPLETE")
			}
		default:
			return nil, fmt.Errorf("unexpected event %v", ev.GetType())
		}
		uid := types.UID(ev.GetPod().GetMetadata().GetUid())
		rv, err := strconv.Atoi(ev.GetPod().GetMetadata().GetResourceVersion())
		if err != nil {
			return nil, err
		}
		seen[uid] = append(seen[uid], rv)
	}
}

// TestSlowWatcherDropped stalls one watcher while another reads: the stalled
// one is dropped with RESOURCE_EXHAUSTED and counted, the reader gets every
// event and the store never blocks.
func TestSlowWatcherDropped(t *testing.T) {
	for _, kind := range clientKinds {
		t.Run(kind.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			// A large pod, and a stalled client with the smallest HTTP/2
			// flow-control windows, fill what can be in flight in a few
			// events.
			pod := podstest.Pod("default", "busy", 1)
			pod.Annotations["padding"] = strings.Repeat("x", 64<<10)
			f := start(t, server.Config{Registry: reg, Watch: server.WatchConfig{Queue: 8}}, false, pod)
			// Separate connections, as separate agents would have: a stalled
			// stream also holds its connection's flow-control window.
			wctx, cancel := context.WithCancel(ctx(t))
			defer cancel()
			healthy, err := kind.dial(t, f.socket).Watch(wctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			stalled, err := kind.dialSmallWindow(t, f.socket).Watch(wctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range []watchStream{healthy, stalled} {
				recv(t, w) // ADDED
				recv(t, w) // INITIAL_SYNC_COMPLETE
			}

			// Change the pod until the stalled watcher is dropped, waiting
			// for the healthy watcher to receive each change.
			const bound = 20000
			k := 1
			for ; k <= bound && metricValue(t, reg, "kubelet_pod_watch_events_dropped_total", nil) == 0; k++ {
				p := pod.DeepCopy()
				p.ResourceVersion = strconv.Itoa(k + 1)
				f.store.Upsert(p)
				ev := recv(t, healthy)
				if got := ev.GetPod().GetMetadata().GetResourceVersion(); got != p.ResourceVersion {
					t.Fatalf("healthy watcher got version %s, want %s", got, p.ResourceVersion)
				}
			}
			if k > bound {
				t.Fatalf("the stalled watcher was not dropped after %d changes", bound)
			}
			lost := int(metricValue(t, reg, "kubelet_pod_watch_events_dropped_total", nil))

			// The stalled watcher, reading again, gets what was in flight and
			// then the error; it never sees a gap.
			rv := 1
			for {
				ev, err := stalled.Recv()
				if err != nil {
					if codeOf(err) != connect.CodeResourceExhausted || reasonOf(err) != errinfo.FellBehind {
						t.Fatalf("stalled watcher ended with %v, want ResourceExhausted", err)
					}
					m := regexp.MustCompile(`(\d+) events were lost`).FindStringSubmatch(messageOf(err))
					if m == nil || m[1] != strconv.Itoa(lost) {
						t.Fatalf("message %q does not say the %d lost events", messageOf(err), lost)
					}
					break
				}
				got, _ := strconv.Atoi(ev.GetPod().GetMetadata().GetResourceVersion())
				if got != rv+1 {
					t.Fatalf("stalled watcher got version %d after %d", got, rv)
				}
				rv = got
			}
			if delivered := rv - 1; delivered+lost != k-1 {
				t.Fatalf("stalled watcher: %d delivered + %d lost != %d changes", delivered, lost, k-1)
			}

			// The healthy watcher goes on.
			p := pod.DeepCopy()
			p.ResourceVersion = "final"
			f.store.Upsert(p)
			if got := recv(t, healthy).GetPod().GetMetadata().GetResourceVersion(); got != "final" {
				t.Fatalf("healthy watcher got %s after the drop, want final", got)
			}
		})
	}
}

// TestShutdown stops a server with open watches: they end with UNAVAILABLE,
// Serve returns and the socket is gone.
func TestShutdown(t *testing.T) {
	for _, kind := range clientKinds {
		t.Run(kind.name, func(t *testing.T) {
			st := storeWith(samplePods()...)
			sock := podstest.SocketPath(t)
			srv, err := server.New(st, server.Config{Socket: sock, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
			if err != nil {
				t.Fatal(err)
			}
			sctx, stop := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- srv.Serve(sctx) }()

			c := kind.dial(t, sock)
			var watches []watchStream
			for range 3 {
				w, err := c.Watch(ctx(t), nil)
				if err != nil {
					t.Fatal(err)
				}
				for range len(samplePods()) + 1 {
					recv(t, w)
				}
				watches = append(watches, w)
			}
			stop()
			for i, w := range watches {
				if _, err := w.Recv(); codeOf(err) != connect.CodeUnavailable || reasonOf(err) != errinfo.ShuttingDown {
					t.Fatalf("watch %d ended with %v, want Unavailable", i, err)
				}
			}
			if err := <-done; err != nil {
				t.Fatalf("Serve: %v", err)
			}
			if _, err := os.Lstat(sock); !os.IsNotExist(err) {
				t.Fatalf("socket still exists after shutdown: %v", err)
			}
		})
	}
}
