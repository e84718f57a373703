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
// this store (see Revision): instead of a snapshot, it returns the range of
// changes made after rev, which the store keeps in its bounded history (see
// WithHistory) and ReadHistory reads, and the watcher's queue gets every
// later change, with no gap and no duplicate between the two. It fails with
// ErrRevisionTooOld when the history no longer holds every change after rev,
// or rev is a revision of another store, and with ErrRevisionInvalid when rev
// is not a revision this store wrote.
//
// The range holds no change itself: a resumed watcher reads its changes in
// batches while it sends them, so that a herd of watchers resuming far back
// does not each keep a copy of the history.
func (s *Store) WatchFrom(rev string, queue int, onDrop func(lost int)) (Replay, *Watcher, error) {
	version, err := s.parseRevision(rev)
	if err != nil {
		return Replay{}, nil, err
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
		return Replay{}, nil, fmt.Errorf("%w %q: ahead of the server's revision %s", ErrRevisionInvalid, rev, s.Revision(s.version))
	}
	if !s.history.holds(version, s.version) {
		return Replay{}, nil, fmt.Errorf("%w: the server no longer holds the changes after revision %q", ErrRevisionTooOld, rev)
	}
	s.viewLag = max(s.viewLag, w.limit)
	w.since = s.version
	s.watchers[w] = struct{}{}
	return Replay{After: version, Until: s.version}, w, nil
}

// Replay is the range of changes a resumed watcher is owed from the
// history: the store versions after After, up to and including Until (the
// watcher's Since).
type Replay struct {
	After, Until uint64
}

// Len returns the number of changes in the range.
func (r Replay) Len() int { return int(r.Until - r.After) }

// ReadHistory returns the changes of the history after version after, up
// to and including until, at most max(cap(buf), 1) of them, in a slice that
// reuses buf's storage. It fails with ErrRevisionTooOld when the history no
// longer holds the change after after: a resumed watcher that reads its
// replay slower than the history turns over has fallen behind it.
func (s *Store) ReadHistory(after, until uint64, buf []Event) ([]Event, error) {
	clear(buf[:cap(buf)])
	s.mu.Lock()
	defer s.mu.Unlock()
	events, ok := s.history.read(after, min(until, s.version), buf[:0])
	if !ok {
		return nil, fmt.Errorf("%w: the server no longer holds the changes after revision %q", ErrRevisionTooOld, s.Revision(after))
	}
	return events, nil
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
	w.store.queued.Add(-int64(len(events)))
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
	w.mu.Lock()
	w.store.queued.Add(-int64(len(w.queue)))
	w.queue = nil
	w.mu.Unlock()
}

// push queues ev and reports whether it fit; when it does not, the queue is
// emptied and lost says how many events the watcher lost.
func (w *Watcher) push(ev Event) (lost int, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) >= w.limit {
		lost = len(w.queue) + 1
		w.store.queued.Add(-int64(len(w.queue)))
		w.queue = nil
		return lost, false
	}
	w.queue = append(w.queue, ev)
	w.store.queued.Add(1)
	return 0, true
}

// broadcast records ev in the history, queues it for every watcher and drops
// those whose queue is full. s.mu is held.
func (s *Store) broadcast(ev Event) {
	s.history.add(ev)
	s.historyBytes.Store(s.history.bytes)
	if s.history.n == 0 {
		// No history: what the change replaced leaves the views now.
		if ev.Prev != nil {
			ev.Prev.shed()
		}
		if !s.current(ev.Pod) {
			ev.Pod.shed()
		}
	}
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
