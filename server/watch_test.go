package server_test

import (
	"context"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/errinfo"
	"github.com/podsapi/podsapi/internal/rigs/podstest"
	"github.com/podsapi/podsapi/server"
)

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
