package podstest

import (
	"testing"

	"github.com/podsapi/podsapi/store"
)

// Waited is a store that tells each time a waiting FindPods takes its
// channel of changes (store.Store.Changed): the call is then admitted and
// looks its key up next, so that a change made after the tell is one the
// call waited for. Serve it in place of its Store.
type Waited struct {
	*store.Store
	waiting chan struct{}
}

// NewWaited returns st telling its waiters, up to 4,096 tells not yet
// received.
func NewWaited(st *store.Store) *Waited {
	return &Waited{Store: st, waiting: make(chan struct{}, 4096)}
}

// Changed is the store's, told.
func (w *Waited) Changed() <-chan struct{} {
	ch := w.Store.Changed()
	w.waiting <- struct{}{}
	return ch
}

// WaitFor receives n tells, failing the test near its deadline.
func (w *Waited) WaitFor(t *testing.T, n int) {
	t.Helper()
	near, stop := NearDeadline(t)
	defer stop()
	for range n {
		select {
		case <-w.waiting:
		case <-near:
			t.Fatalf("FindPods did not wait")
		}
	}
}

// Told returns how many tells were not received yet.
func (w *Waited) Told() int { return len(w.waiting) }
