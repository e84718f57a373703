package store

import "sync/atomic"

// Watcher receives the live events of a Store. Create one with
// Store.Watch; stop it with Stop.
type Watcher struct {
	store   *Store
	events  chan Event
	dropped chan struct{}
	lost    atomic.Int64
	onDrop  func(lost int)
}

// Watch registers a watcher whose queue holds at most queue live events
// (at least 1), and returns it with the pods current at that moment, sorted as
// List sorts them. Every change after the snapshot, and no change before it,
// reaches the watcher's queue. When the queue is full, the watcher is dropped:
// it gets no further event, Dropped is closed, and onDrop, if not nil, is told
// how many events the watcher lost (the one that did not fit and those still
// queued). onDrop is called with the store locked and must not call the store.
func (s *Store) Watch(queue int, onDrop func(lost int)) ([]*Pod, *Watcher) {
	w := &Watcher{
		store:   s,
		events:  make(chan Event, max(queue, 1)),
		dropped: make(chan struct{}),
		onDrop:  onDrop,
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchers[w] = struct{}{}
	return s.list(), w
}

// Events returns the channel of the watcher's live events.
func (w *Watcher) Events() <-chan Event { return w.events }

// Dropped returns a channel that is closed when the watcher was dropped for
// falling behind. Events still queued then are lost.
func (w *Watcher) Dropped() <-chan struct{} { return w.dropped }

// Lost returns the number of events the watcher lost when it was dropped, or
// 0 if it was not.
func (w *Watcher) Lost() int { return int(w.lost.Load()) }

// Stop unregisters the watcher. It is safe to call more than once.
func (w *Watcher) Stop() {
	w.store.mu.Lock()
	defer w.store.mu.Unlock()
	delete(w.store.watchers, w)
}

// broadcast queues ev for every watcher and drops those whose queue is full.
// s.mu is held.
func (s *Store) broadcast(ev Event) {
	for w := range s.watchers {
		select {
		case w.events <- ev:
		default:
			lost := len(w.events) + 1
			delete(s.watchers, w)
			w.lost.Store(int64(lost))
			close(w.dropped)
			if w.onDrop != nil {
				w.onDrop(lost)
			}
		}
	}
}
