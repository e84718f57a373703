package store

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Watcher receives the live events of a Store. Create one with
// Store.Watch; stop it with Stop.
//
// Its queue grows with the events waiting for it, up to its limit, rather
// than being allocated at its limit: an idle watcher costs a few hundred
// bytes, whatever the limit.
type Watcher struct {
	store   *Store
	limit   int
	onDrop  func(lost int)
	ready   chan struct{} // holds a token when events may be queued
	dropped chan struct{}
	lost    atomic.Int64
	since   uint64 // the store version the watcher started after

	mu    sync.Mutex
	queue []Event
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
		limit:   max(queue, 1),
		onDrop:  onDrop,
		ready:   make(chan struct{}, 1),
		dropped: make(chan struct{}),
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.viewLag = max(s.viewLag, w.limit)
	w.since = s.version
	s.watchers[w] = struct{}{}
	return s.list(), w
}

// WatchFrom is Watch for a watcher that resumes after rev, a revision of
// this store (see Revision): instead of a snapshot, it returns the changes
// made after rev, which the store keeps in its bounded history (see
// WithHistory), and the watcher's queue gets every later change, with no gap
// and no duplicate between the two. It fails with ErrRevisionTooOld when the
// history no longer holds every change after rev, or rev is a revision of
// another store, and with ErrRevisionInvalid when rev is not a revision this
// store wrote.
func (s *Store) WatchFrom(rev string, queue int, onDrop func(lost int)) ([]Event, *Watcher, error) {
	version, err := s.parseRevision(rev)
	if err != nil {
		return nil, nil, err
	}
	w := &Watcher{
		store:   s,
		limit:   max(queue, 1),
		onDrop:  onDrop,
		ready:   make(chan struct{}, 1),
		dropped: make(chan struct{}),
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if version > s.version {
		return nil, nil, fmt.Errorf("%w %q: ahead of the server's revision %s", ErrRevisionInvalid, rev, s.Revision(s.version))
	}
	events, ok := s.history.since(version, s.version)
	if !ok {
		return nil, nil, fmt.Errorf("%w: the server no longer holds the changes after revision %q", ErrRevisionTooOld, rev)
	}
	s.viewLag = max(s.viewLag, w.limit)
	w.since = s.version
	s.watchers[w] = struct{}{}
	return events, w, nil
}

// Since returns the store version the watcher started after: every change
// after it, and none before, reaches its queue.
func (w *Watcher) Since() uint64 { return w.since }

// Ready returns a channel that receives a value after events are queued.
// A receive may find the queue empty: Take what it holds and wait again.
func (w *Watcher) Ready() <-chan struct{} { return w.ready }

// Take removes every queued event, in order, and returns them in a slice
// that reuses buf's storage. Pass the slice Take returned last time as buf,
// once done with its events, so that a busy watcher does not allocate.
func (w *Watcher) Take(buf []Event) []Event {
	clear(buf)
	w.mu.Lock()
	defer w.mu.Unlock()
	events := w.queue
	w.queue = buf[:0]
	return events
}

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

// push queues ev and reports whether it fit; when it does not, the queue is
// emptied and lost says how many events the watcher lost.
func (w *Watcher) push(ev Event) (lost int, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) >= w.limit {
		lost = len(w.queue) + 1
		w.queue = nil
		return lost, false
	}
	w.queue = append(w.queue, ev)
	return 0, true
}

// broadcast records ev in the history, queues it for every watcher and drops
// those whose queue is full. s.mu is held.
func (s *Store) broadcast(ev Event) {
	s.history.add(ev)
	s.history.shedViews(s.viewLag, s.current)
	for w := range s.watchers {
		lost, ok := w.push(ev)
		if ok {
			select {
			case w.ready <- struct{}{}:
			default:
			}
			continue
		}
		delete(s.watchers, w)
		w.lost.Store(int64(lost))
		close(w.dropped)
		if w.onDrop != nil {
			w.onDrop(lost)
		}
	}
}
