package store_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// replayed reads every change of r from st, in batches of three.
func replayed(t testing.TB, st *store.Store, r store.Replay) []store.Event {
	t.Helper()
	var out []store.Event
	buf := make([]store.Event, 0, 3)
	for after := r.After; after < r.Until; {
		events, err := st.ReadHistory(after, r.Until, buf)
		if err != nil {
			t.Fatalf("read the replay after %d: %v", after, err)
		}
		if len(events) == 0 {
			t.Fatalf("read the replay after %d of %d: no change", after, r.Until)
		}
		out = append(out, events...)
		after = events[len(events)-1].Version
	}
	return out
}

// TestReplaySharesTheHistory checks that a resumed watcher owes a range of
// the history, not a copy of it: it reads it in batches as it sends, the
// batches end at the watcher's start, and a watcher that reads slower than
// the history turns over learns it fell behind the history.
func TestReplaySharesTheHistory(t *testing.T) {
	st := store.New(store.WithHistory(20, 1<<30))
	for i := range 10 {
		st.Upsert(podstest.Pod("ns", fmt.Sprintf("p%d", i), i))
	}
	r, w, err := st.WatchFrom(st.Revision(4), 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if r.After != 4 || r.Until != 10 || r.Len() != 6 || w.Since() != 10 {
		t.Fatalf("replay %+v (len %d), watcher since %d; want 4..10", r, r.Len(), w.Since())
	}
	// Changes after the watcher started reach its queue, not its replay.
	st.Upsert(podstest.Pod("ns", "later", 99))
	events := replayed(t, st, r)
	if len(events) != 6 || events[0].Version != 5 || events[5].Version != 10 {
		t.Fatalf("replayed %d changes, want versions 5 to 10", len(events))
	}
	if q := w.Take(nil); len(q) != 1 || q[0].Version != 11 {
		t.Fatalf("queue holds %d events, want the change at 11", len(q))
	}
	// The history turns over before the replay is read.
	for i := range 30 {
		st.Upsert(podstest.Pod("ns", fmt.Sprintf("q%d", i), i))
	}
	if _, err := st.ReadHistory(r.After, r.Until, nil); !errors.Is(err, store.ErrRevisionTooOld) {
		t.Fatalf("reading a replay the history no longer holds: %v, want ErrRevisionTooOld", err)
	}
	// An empty range reads nothing, and is not an error.
	if events, err := st.ReadHistory(r.Until, r.Until, nil); err != nil || len(events) != 0 {
		t.Fatalf("empty range: %d changes, %v", len(events), err)
	}
}
