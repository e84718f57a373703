package service_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/service"
	"github.com/podsapi/podsapi/test/podstest"
)

// expectSteps reads the events of steps from recv, which must arrive in
// order with the revision of their change; revs are the store's revisions
// after each step.
func expectSteps(t *testing.T, recv func() (*podsv1alpha1.PodWatchResponse, error), steps []podstest.Step, revs []string) {
	t.Helper()
	for i, s := range steps {
		if s.Type == 0 {
			continue
		}
		ev := next(t, recv)
		expectEvent(t, ev, s.Type, s.Pod)
		if ev.GetRevision() != revs[i] {
			t.Fatalf("%s: revision %q, want %q", s.Name, ev.GetRevision(), revs[i])
		}
	}
}

// TestWatchSelectorMoves watches tier=web while pods move in and out of it.
func TestWatchSelectorMoves(t *testing.T) {
	for _, kind := range clientKinds {
		t.Run(kind.name, func(t *testing.T) {
			pods := podstest.SelectorPods()
			h := newHarness(t, synced(nil, pods...), true)
			w, err := kind.dial(t, h).Watch(t.Context(), &podsv1alpha1.PodWatchRequest{LabelSelector: "tier=web"})
			if err != nil {
				t.Fatal(err)
			}
			start := h.revision()
			for _, p := range pods[:2] {
				ev := next(t, w)
				expectEvent(t, ev, podsv1alpha1.EventType_EVENT_TYPE_ADDED, p)
				if ev.GetRevision() != start {
					t.Fatalf("snapshot event revision %q, want %q", ev.GetRevision(), start)
				}
			}
			if ev := next(t, w); ev.GetType() != podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE || ev.GetRevision() != start {
				t.Fatalf("after the snapshot: %v, want INITIAL_SYNC_COMPLETE at %s", ev, start)
			}
			steps := podstest.MovingSteps()
			var revs []string
			for _, s := range steps {
				s.Change(h.store)
				revs = append(revs, h.revision())
			}
			expectSteps(t, w, steps, revs)
		})
	}
}

// TestWatchResume resumes watches from revisions inside the history: each
// gets exactly the changes after its revision, as its selector sees them,
// then INITIAL_SYNC_COMPLETE, then live events.
func TestWatchResume(t *testing.T) {
	for _, kind := range clientKinds {
		t.Run(kind.name, func(t *testing.T) {
			h := newHarness(t, synced(nil, podstest.SelectorPods()...), true)
			c := kind.dial(t, h)
			list, err := c.List(t.Context(), &podsv1alpha1.PodListRequest{LabelSelector: "tier=web"})
			if err != nil {
				t.Fatal(err)
			}
			steps := podstest.MovingSteps()
			var revs []string
			for _, s := range steps {
				s.Change(h.store)
				revs = append(revs, h.revision())
			}
			for from := range steps {
				rev := list.GetRevision()
				if from > 0 {
					rev = revs[from-1]
				}
				w, err := c.Watch(t.Context(), &podsv1alpha1.PodWatchRequest{LabelSelector: "tier=web", ResumeFrom: rev})
				if err != nil {
					t.Fatal(err)
				}
				expectSteps(t, w, steps[from:], revs[from:])
				if ev := next(t, w); ev.GetType() != podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE || ev.GetRevision() != h.revision() {
					t.Fatalf("resumed from step %d: %v, want INITIAL_SYNC_COMPLETE at %s", from, ev, h.revision())
				}
			}
			// Without a selector, from the current revision: nothing to
			// replay, then live events.
			w, err := c.Watch(t.Context(), &podsv1alpha1.PodWatchRequest{ResumeFrom: h.revision()})
			if err != nil {
				t.Fatal(err)
			}
			if ev := next(t, w); ev.GetType() != podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE {
				t.Fatalf("resumed from the current revision: %v, want INITIAL_SYNC_COMPLETE", ev)
			}
			live := podstest.Labelled("default", "live", 20, "db", corev1.PodRunning)
			h.store.Upsert(live)
			expectEvent(t, next(t, w), podsv1alpha1.EventType_EVENT_TYPE_ADDED, live)
		})
	}
}

// TestProgressMarks asks for progress marks with a short interval: an idle
// watcher gets marks carrying the store's revision, which moves with changes
// its selector hides; a watcher that did not ask gets none. The marks are
// waited for by their revision, not by time.
func TestProgressMarks(t *testing.T) {
	for _, kind := range clientKinds {
		t.Run(kind.name, func(t *testing.T) {
			h := newHarness(t, synced(nil, podstest.SelectorPods()...), true, service.WithProgressInterval(5*time.Millisecond))
			c := kind.dial(t, h)
			w, err := c.Watch(t.Context(), &podsv1alpha1.PodWatchRequest{Namespace: "kube-system", ProgressNotify: true})
			if err != nil {
				t.Fatal(err)
			}
			plain, err := c.Watch(t.Context(), &podsv1alpha1.PodWatchRequest{Namespace: "kube-system"})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []func() (*podsv1alpha1.PodWatchResponse, error){w, plain} {
				next(t, s) // ADDED dns-0
				if ev := next(t, s); ev.GetType() != podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE {
					t.Fatalf("%v, want INITIAL_SYNC_COMPLETE", ev)
				}
			}
			// untilMark reads marks until one carries rev.
			untilMark := func(rev string) {
				t.Helper()
				for {
					ev := next(t, w)
					if ev.GetType() != podsv1alpha1.EventType_EVENT_TYPE_PROGRESS || ev.GetPod() != nil {
						t.Fatalf("%v, want a PROGRESS without a pod", ev)
					}
					if ev.GetRevision() == rev {
						return
					}
				}
			}
			untilMark(h.revision())
			// Changes the selector hides move the marks' revision.
			hidden := podstest.Labelled("default", "hidden", 30, "web", corev1.PodRunning)
			h.store.Upsert(hidden)
			untilMark(h.revision())
			// The watcher that did not ask got no mark meanwhile.
			shown := podstest.Labelled("kube-system", "shown", 31, "web", corev1.PodRunning)
			h.store.Upsert(shown)
			expectEvent(t, next(t, plain), podsv1alpha1.EventType_EVENT_TYPE_ADDED, shown)
		})
	}
}
