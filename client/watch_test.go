package client_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/client"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/test/podstest"
)

// next returns the next event of w, failing the test on an error.
func next(t *testing.T, w *client.Watcher) client.Event {
	t.Helper()
	ev, err := w.Next()
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	return ev
}

// expect checks the type and pod of an event.
func expect(t *testing.T, ev client.Event, typ client.EventType, want *corev1.Pod) {
	t.Helper()
	if ev.Type != typ {
		t.Fatalf("event type = %v, want %v", ev.Type, typ)
	}
	if d := podDiff(ev.Pod, want); d != "" {
		t.Fatalf("%v event: %s", typ, d)
	}
}

// TestWatch checks the snapshot, the sync marker, live events and the end of
// the watch when the server shuts down.
func TestWatch(t *testing.T) {
	pods := samplePods()
	st := newStore(false, pods[:2]...)
	srv := serve(t, st, podstest.SocketPath(t))
	c := dial(t, srv.socket)
	w, err := c.Watch(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	expect(t, next(t, w), client.Added, pods[0])
	expect(t, next(t, w), client.Added, pods[1])
	expect(t, next(t, w), client.Synced, nil)

	st.Upsert(pods[2])
	expect(t, next(t, w), client.Added, pods[2])
	changed := pods[0].DeepCopy()
	changed.ResourceVersion = "2"
	changed.Status.Phase = corev1.PodFailed
	st.Upsert(changed)
	expect(t, next(t, w), client.Modified, changed)
	st.Delete(pods[1].UID)
	expect(t, next(t, w), client.Deleted, pods[1])

	srv.stop(t)
	_, err = w.Next()
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("after shutdown Next = %v, want UNAVAILABLE", err)
	}
	if _, again := w.Next(); again != err {
		t.Fatalf("Next after the end = %v, want the same error %v", again, err)
	}
}

// TestWatchFellBehind stalls a watcher until the server drops it, and checks
// that its error wraps ErrFellBehind and carries the revision a new watch
// resumes from, with no change lost or repeated.
func TestWatchFellBehind(t *testing.T) {
	reg := prometheus.NewRegistry()
	pod := podstest.Pod("default", "busy", 1)
	pod.Annotations["padding"] = strings.Repeat("x", 64<<10)
	st := newStore(false, pod)
	c := startClient(t, st, server.Config{Registry: reg, Watch: server.WatchConfig{Queue: 8}})
	w, err := c.Watch(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	const bound = 20000
	k := 1
	for ; k <= bound && dropped(t, reg) == 0; k++ {
		p := pod.DeepCopy()
		p.ResourceVersion = strconv.Itoa(k + 1)
		st.Upsert(p)
	}
	if k > bound {
		t.Fatalf("the watcher was not dropped after %d changes", bound)
	}
	lastRV := 0 // of the last event received
	for {
		ev, err := w.Next()
		if err == nil {
			if ev.Pod != nil {
				lastRV, _ = strconv.Atoi(ev.Pod.ResourceVersion)
			}
			continue
		}
		if !errors.Is(err, client.ErrFellBehind) || errors.Is(err, client.ErrRateLimited) ||
			connect.CodeOf(err) != connect.CodeResourceExhausted {
			t.Fatalf("stalled watch ended with %v, want ErrFellBehind", err)
		}
		rev := client.ResumeRevision(err)
		if rev == "" {
			t.Fatalf("FELL_BEHIND without a revision to resume from: %v", err)
		}
		resumed, err := c.Watch(testCtx(t), client.WithResumeFrom(rev))
		if err != nil {
			t.Fatal(err)
		}
		defer resumed.Close()
		for {
			ev := next(t, resumed)
			if ev.Type == client.Synced {
				break
			}
			if rv, _ := strconv.Atoi(ev.Pod.ResourceVersion); rv != lastRV+1 {
				t.Fatalf("resumed with version %d after %d", rv, lastRV)
			}
			lastRV++
		}
		if want := k; lastRV != want {
			t.Fatalf("after resuming, the last version seen is %d, want %d", lastRV, want)
		}
		break
	}
}

// dropped returns kubelet_pod_watch_events_dropped_total.
func dropped(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "kubelet_pod_watch_events_dropped_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}
