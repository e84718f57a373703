package store_test

import (
	"errors"
	"strconv"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

func TestUpsertDelete(t *testing.T) {
	st := store.New()
	a, b := podstest.Pod("ns-b", "a", 1), podstest.Pod("ns-a", "b", 2)
	st.Upsert(a)
	st.Upsert(b)
	v1, pods := st.List()
	if len(pods) != 2 || pods[0].Name != "b" || pods[1].Name != "a" {
		t.Fatalf("List = %v, want b (ns-a) then a (ns-b)", names(pods))
	}

	st.Upsert(a.DeepCopy()) // the same version: no change
	if v, _ := st.List(); v != v1 {
		t.Fatalf("version moved from %d to %d on an unchanged pod", v1, v)
	}

	changed := a.DeepCopy()
	changed.Status.Phase = corev1.PodSucceeded
	st.Upsert(changed)
	v2, after := st.List()
	if v2 <= v1 {
		t.Fatalf("version %d after a change, was %d", v2, v1)
	}
	if pods[1] == after[1] {
		t.Fatal("the change modified the slice an earlier List returned")
	}
	if got, ok := st.Get(a.UID); !ok || got.Version != v2 {
		t.Fatalf("Get = %v, %v; want version %d", got, ok, v2)
	}

	st.Delete(a.UID)
	st.Delete("unknown")
	if _, ok := st.Get(a.UID); ok {
		t.Fatal("deleted pod still found")
	}
	if _, pods := st.List(); len(pods) != 1 {
		t.Fatalf("List after delete has %d pods", len(pods))
	}
}

func TestViewIsComputedOnce(t *testing.T) {
	st := store.New()
	st.Upsert(podstest.Pod("ns", "a", 1))
	_, pods := st.List()
	var calls atomic.Int32
	compute := func(raw []byte) ([]byte, error) {
		calls.Add(1)
		return raw[:10], nil
	}
	for range 5 {
		if v, err := pods[0].View("k", compute); err != nil || len(v) != 10 {
			t.Fatalf("View = %d bytes, %v", len(v), err)
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("computed %d times, want once", calls.Load())
	}
	// Errors are remembered like results, so a bad view is not retried per
	// request.
	boom := errors.New("boom")
	for range 2 {
		if _, err := pods[0].View("bad", func([]byte) ([]byte, error) { calls.Add(1); return nil, boom }); !errors.Is(err, boom) {
			t.Fatalf("View error = %v", err)
		}
	}
	if calls.Load() != 2 {
		t.Fatalf("computed %d times, want 2", calls.Load())
	}
}

func TestWatchDropsFullQueue(t *testing.T) {
	st := store.New()
	pod := podstest.Pod("ns", "a", 1)
	st.Upsert(pod)
	var lost int
	snapshot, w := st.Watch(2, func(n int) { lost = n })
	defer w.Stop()
	other, ow := st.Watch(100, nil)
	defer ow.Stop()
	if len(snapshot) != 1 || len(other) != 1 {
		t.Fatalf("snapshots of %d and %d pods, want 1", len(snapshot), len(other))
	}
	for i := range 3 {
		p := pod.DeepCopy()
		p.ResourceVersion = string(rune('a' + i))
		st.Upsert(p)
	}
	select {
	case <-w.Dropped():
	default:
		t.Fatal("the watcher with a full queue was not dropped")
	}
	if lost != 3 || w.Lost() != 3 {
		t.Fatalf("lost = %d (Lost %d), want 3", lost, w.Lost())
	}
	select {
	case <-ow.Ready():
	default:
		t.Fatal("the other watcher is not ready with events queued")
	}
	events := ow.Take(nil)
	if len(events) != 3 {
		t.Fatalf("the other watcher had %d events queued, want 3", len(events))
	}
	ev := events[0]
	if again := ow.Take(events); len(again) != 0 {
		t.Fatalf("a second Take returned %d events, want none", len(again))
	}
	if ev.Type != store.Modified || ev.Prev == nil || ev.Prev.UID != pod.UID {
		t.Fatalf("event = %v, want MODIFIED with the previous version", ev)
	}
}

func names(pods []*store.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

// TestHistorySheds checks that the history keeps the shared views of a pod
// version only while a live watcher may still have its change queued: an
// older, replaced version computes its views again instead of keeping them,
// so that the history holds no more than it counts, while a current version,
// however old, keeps its views.
func TestHistorySheds(t *testing.T) {
	const queue, changes = 4, 20
	st := store.New()
	_, w := st.Watch(queue, nil)
	defer w.Stop()
	computes := 0
	view := func(p *store.Pod) {
		t.Helper()
		if _, err := p.View("k", func(raw []byte) ([]byte, error) { computes++; return raw, nil }); err != nil {
			t.Fatal(err)
		}
	}
	still := podstest.Pod("ns", "still", 1)
	st.Upsert(still)
	stillPod := w.Take(nil)[0].Pod
	view(stillPod)

	pod := podstest.Pod("ns", "a", 2)
	var events []store.Event
	for i := range changes {
		p := pod.DeepCopy()
		p.ResourceVersion = strconv.Itoa(i + 1)
		st.Upsert(p)
		evs := w.Take(nil)
		if len(evs) != 1 {
			t.Fatalf("change %d: %d events", i, len(evs))
		}
		view(evs[0].Pod)
		events = append(events, evs[0])
	}
	for i, ev := range events {
		before := computes
		view(ev.Pod)
		kept := computes == before
		// A full queue holds the latest queue changes, the current
		// version among them; an older change is in no live queue.
		if wantKept := i >= changes-queue; kept != wantKept {
			t.Errorf("change %d of %d: view kept %v, want %v", i+1, changes, kept, wantKept)
		}
	}
	before := computes
	view(stillPod)
	if computes != before {
		t.Error("a current version lost its view because other pods changed")
	}
}
