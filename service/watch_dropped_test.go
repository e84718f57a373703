package service_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/errinfo"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestSlowWatcherDropped stalls one watcher while another reads: the stalled
// one is dropped with RESOURCE_EXHAUSTED and counted, the reader gets every
// event and the store never blocks.
func TestSlowWatcherDropped(t *testing.T) {
	for _, kind := range podstest.ClientKinds {
		t.Run(kind.Name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			// A large pod, and a stalled client with the smallest HTTP/2
			// flow-control windows, fill what can be in flight in a few
			// events.
			pod := podstest.Pod("default", "busy", 1)
			pod.Annotations["padding"] = strings.Repeat("x", 64<<10)
			f := start(t, server.Config{Registry: reg, Watch: server.WatchConfig{Queue: 8}}, false, pod)
			// Separate connections, as separate agents would have: a stalled
			// stream also holds its connection's flow-control window.
			wctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			healthy, err := kind.Dial(t, f.Socket).Watch(wctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			stalled, err := kind.DialSmallWindow(t, f.Socket).Watch(wctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range []podstest.WatchStream{healthy, stalled} {
				podstest.Recv(t, w) // ADDED
				podstest.Recv(t, w) // INITIAL_SYNC_COMPLETE
			}

			// Change the pod until the stalled watcher is dropped, waiting
			// for the healthy watcher to receive each change.
			const bound = 20000
			k := 1
			for ; k <= bound && podstest.MetricValue(t, reg, "kubelet_pod_watch_events_dropped_total", nil) == 0; k++ {
				p := pod.DeepCopy()
				p.ResourceVersion = strconv.Itoa(k + 1)
				f.Store.Upsert(p)
				ev := podstest.Recv(t, healthy)
				if got := ev.GetPod().GetMetadata().GetResourceVersion(); got != p.ResourceVersion {
					t.Fatalf("healthy watcher got version %s, want %s", got, p.ResourceVersion)
				}
			}
			if k > bound {
				t.Fatalf("the stalled watcher was not dropped after %d changes", bound)
			}
			lost := int(podstest.MetricValue(t, reg, "kubelet_pod_watch_events_dropped_total", nil))

			// The stalled watcher, reading again, gets what was in flight and
			// then the error; it never sees a gap.
			rv := 1
			for {
				ev, err := stalled.Recv()
				if err != nil {
					if podstest.ErrorCode(err) != connect.CodeResourceExhausted || podstest.ErrorReason(err) != errinfo.FellBehind {
						t.Fatalf("stalled watcher ended with %v, want ResourceExhausted", err)
					}
					m := regexp.MustCompile(`(\d+) events were lost`).FindStringSubmatch(podstest.ErrorMessage(err))
					if m == nil || m[1] != strconv.Itoa(lost) {
						t.Fatalf("message %q does not say the %d lost events", podstest.ErrorMessage(err), lost)
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
			f.Store.Upsert(p)
			if got := podstest.Recv(t, healthy).GetPod().GetMetadata().GetResourceVersion(); got != "final" {
				t.Fatalf("healthy watcher got %s after the drop, want final", got)
			}
		})
	}
}
