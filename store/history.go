package store

// Defaults of WithHistory.
const (
	// DefaultHistory is the number of changes the store keeps for watchers
	// that resume.
	DefaultHistory = 10000
	// DefaultHistoryBytes bounds the memory of those changes (as counted
	// by historySize).
	DefaultHistoryBytes = 64 << 20
)

// historyOverhead is what one change of the history costs beside the
// encoding of its pod: the Pod and its selectable fields, labels and event
// slot, rounded up.
const historyOverhead = 512

// WithHistory sets how many of its latest changes the store keeps, so that a
// watcher can resume after a revision (WatchFrom): at most events changes,
// whose pods' encodings and overhead add up to at most bytes. The oldest go
// first. The defaults are DefaultHistory and DefaultHistoryBytes, which 0
// keeps (the zero rule of package source); a negative value for either keeps
// no history, and WatchFrom then only accepts the current revision. A change
// counts at most half of bytes, so that one pod larger than bytes does not
// empty the history.
func WithHistory(events int, bytes int64) Option {
	return func(s *Store) {
		s.history = history{maxEvents: DefaultHistory, maxBytes: DefaultHistoryBytes}
		switch {
		case events < 0:
			s.history.maxEvents = 0
		case events > 0:
			s.history.maxEvents = events
		}
		switch {
		case bytes < 0:
			s.history.maxBytes = 0
		case bytes > 0:
			s.history.maxBytes = bytes
		}
	}
}

// history is a ring of the latest changes of the store, oldest first. Its
// versions are consecutive: every change of the store moves its version by
// one.
type history struct {
	maxEvents int
	maxBytes  int64
	ring      []Event
	start, n  int
	bytes     int64
}

// historySize is what ev counts against the history's bytes: the encoding
// of the pod it retains, and its overhead. The previous version of a
// MODIFIED event is not counted: it is the pod of an earlier change, counted
// there, or the pod current when the change left the history.
func historySize(ev Event) int64 { return int64(len(ev.Pod.raw)) + historyOverhead }

// add appends ev, dropping the oldest changes beyond the bounds.
func (h *history) add(ev Event) {
	if h.maxEvents == 0 || h.maxBytes == 0 {
		return
	}
	size := h.cost(ev)
	for h.n > 0 && (h.n >= h.maxEvents || h.bytes+size > h.maxBytes) {
		h.dropOldest()
	}
	if h.n == len(h.ring) {
		h.grow()
	}
	h.ring[(h.start+h.n)%len(h.ring)] = ev
	h.n++
	h.bytes += size
}

// cost is what ev counts against the bound of bytes: its historySize, but
// at most half the bound, so that one change larger than the whole bound
// (a pod of --max-pod-bytes in a small history) pushes out half the history
// rather than all of it, and leaves resumable the changes before it. The
// history then holds at most its bound plus twice the largest pod.
func (h *history) cost(ev Event) int64 { return min(historySize(ev), max(h.maxBytes/2, 1)) }

func (h *history) dropOldest() {
	old := &h.ring[h.start]
	h.bytes -= h.cost(*old)
	*old = Event{}
	h.start = (h.start + 1) % len(h.ring)
	h.n--
}

// grow doubles the ring, up to maxEvents, so that a small store does not
// allocate its whole history up front.
func (h *history) grow() {
	size := min(max(2*len(h.ring), 64), h.maxEvents)
	ring := make([]Event, size)
	for i := range h.n {
		ring[i] = h.ring[(h.start+i)%len(h.ring)]
	}
	h.ring, h.start = ring, 0
}

// shedViews drops the shared views of the pod versions that the change lag
// changes before the latest one retains, once no live watcher can still
// have that change queued: its new version unless current says it is still
// the pod's current version, and the version it replaced. The history then
// holds no more than it counts (historySize): each of its changes would
// otherwise keep every masked view and encoded event computed for the live
// watchers, several times the pod's encoding. A watcher still delivering
// such a change, or a resumed one, computes the view again, without keeping
// it (Pod.shed).
func (h *history) shedViews(lag int, current func(*Pod) bool) {
	if lag >= h.n {
		return
	}
	ev := &h.ring[(h.start+h.n-1-lag)%len(h.ring)]
	if ev.Prev != nil {
		ev.Prev.shed()
	}
	if !current(ev.Pod) {
		ev.Pod.shed()
	}
}

// holds reports whether the history holds every change after version:
// current is the store's version.
func (h *history) holds(version, current uint64) bool {
	if version == current {
		return true
	}
	if h.n == 0 || version > current {
		return false
	}
	return version+1 >= h.ring[h.start].Version
}

// read appends to buf the changes after version up to and including until,
// at most max(cap(buf), 1), and reports whether the history still holds the
// change after version (or version is until).
func (h *history) read(version, until uint64, buf []Event) ([]Event, bool) {
	if version >= until {
		return buf, true
	}
	if h.n == 0 {
		return nil, false
	}
	oldest := h.ring[h.start].Version
	if version+1 < oldest {
		return nil, false
	}
	n := min(int(until-version), max(cap(buf), 1))
	skip := int(version + 1 - oldest)
	for i := skip; i < h.n && i < skip+n; i++ {
		buf = append(buf, h.ring[(h.start+i)%len(h.ring)])
	}
	return buf, true
}

// HistoryLen returns the number of changes the history holds and the bytes
// they count against its bound.
func (s *Store) HistoryLen() (events int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.history.n, s.history.bytes
}

// HistoryBytes returns the bytes the history counts against its bound,
// without waiting for the store's lock.
func (s *Store) HistoryBytes() int64 { return s.historyBytes.Load() }
