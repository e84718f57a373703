package service

import (
	"sync"

	"github.com/podsapi/podsapi/budget"
	"github.com/podsapi/podsapi/store"
)

// snapshotChunk is about the most bytes of enveloped events a watch writes at
// once (a chunk ends after the event that reaches it). Between chunks the
// watch checks whether it fell behind or its client left, as it does between
// events when it sends them one at a time. It is the default HTTP/2 window
// of grpc-go clients, and keeps each write short enough that the stall guard
// (--write-stall-timeout) still tells a client that stopped reading from a
// slow one: larger chunks measured no faster (1000 pods, 100 watchers).
const snapshotChunk = 64 << 10

// maxSnapshots bounds the number of enveloped snapshots in flight at once:
// built or being built, being written to at least one watcher, or kept idle
// for the next watch in line (an idle one makes room). A watch whose
// snapshot would be one more streams its events (streamSnapshot).
const maxSnapshots = 16

// maxSnapshotBytes bounds the bytes of the enveloped snapshots in flight at
// once. A snapshot that would not fit is not built: its watchers stream their
// events (streamSnapshot).
const maxSnapshotBytes = 64 << 20

// envelopedSnapshot is the snapshot of a watch, built once per store version,
// wire, field mask and selection and shared by every watcher that starts
// then while another still writes it: an ADDED event for every pod
// selected, in the store's order, each encoded as the message of its wire and
// enveloped, ready for the socket.
type envelopedSnapshot struct {
	// first is the first event, not enveloped: the watch sends it through
	// connect, which writes the response headers with it.
	first []byte
	// rest are the other events, each an enveloped message.
	rest []byte
	// chunks are the ends of the chunks rest is written in, the last one
	// len(rest); every chunk ends at the end of an event.
	chunks []int
}

// snapshotCache holds the enveloped snapshots in flight: a snapshot lives
// while a watcher is building or writing it, and every watcher that starts
// at the same store version, wire, field mask and selection meanwhile shares
// it (the watchers of a sync storm overlap). When its last watcher is done
// the snapshot is kept, idle, while keep reports that a watch holds or
// waits for its snapshot turn (fairness.go), up to maxIdle bytes: the turns send a client's
// snapshots one after another, and without it each watch of a sync storm of
// one client would build again the snapshot the one before it just dropped.
// Otherwise the snapshot is dropped: an idle node keeps none. Idle
// snapshots are dropped when the turns are all given back (dropIdle), when
// a watch starts at a newer store version, and when a snapshot needs their
// room. Only the snapshots of the latest store version a watch started at
// are shared; the bounds count the snapshots in flight of every version,
// idle ones included.
type snapshotCache struct {
	mu      sync.Mutex
	version uint64
	// entries are the snapshots in flight of version, by key, and the idle
	// ones (refs 0).
	entries map[string]*snapshotEntry
	// keep reports whether a watch holds or waits for a snapshot turn: a
	// snapshot without watchers is kept while it does, up to maxIdle bytes
	// of them (idleBytes). Nil keeps none.
	keep      func() bool
	maxIdle   int
	idleBytes int
	// count and bytes are the snapshots in flight of every version, and
	// the bytes reserved for them.
	count   int
	bytes   int
	metrics *Metrics
	// budget counts the bytes reserved (WithBudget).
	budget *budget.Budget
}

// snapshotEntry is one enveloped snapshot, built once; nil when it was not
// built because it would not fit.
type snapshotEntry struct {
	once sync.Once
	s    *envelopedSnapshot
	err  error
	// refs are the watchers holding the entry, and bytes those reserved
	// for it; both guarded by the cache's mu.
	refs  int
	bytes int
}

// get returns the snapshot of version for key, building it with build
// unless a watcher holds it already. build asks reserve for the bytes of the
// snapshot before it allocates them. get returns nil when no more snapshots
// fit in flight, when the snapshot would not be shared (version is older
// than the latest), or when build found no room, and reports whether the
// snapshot was built by this call. The caller holds the snapshot until it
// calls release, which it must call once, whatever get returned.
func (c *snapshotCache) get(version uint64, key string, build func(reserve func(n int) bool) (*envelopedSnapshot, error)) (s *envelopedSnapshot, built bool, release func(), err error) {
	c.mu.Lock()
	if version < c.version {
		// A watch that started before the latest one: its snapshot is
		// not shared.
		c.mu.Unlock()
		return nil, false, func() {}, nil
	}
	if version > c.version || c.entries == nil {
		// The entries in flight of the older version stay counted until
		// their last watcher releases them, but are no longer shared; its
		// idle ones are dropped.
		c.dropIdleLocked(nil)
		c.version = version
		c.entries = make(map[string]*snapshotEntry)
	}
	e, ok := c.entries[key]
	if !ok {
		if c.count >= maxSnapshots && !c.dropOneIdle(nil) {
			c.mu.Unlock()
			return nil, false, func() {}, nil
		}
		e = &snapshotEntry{}
		c.entries[key] = e
		c.count++
		c.metrics.snapshotsInFlight(1, 0)
	}
	if e.refs == 0 {
		c.idleBytes -= e.bytes
	}
	e.refs++
	c.mu.Unlock()
	e.once.Do(func() {
		built = true
		e.s, e.err = build(func(n int) bool { return c.reserve(e, n) })
	})
	var once sync.Once
	return e.s, built && e.s != nil, func() { once.Do(func() { c.release(key, e) }) }, e.err
}

// reserve counts n more bytes against the snapshots in flight, for e, and
// reports whether they fit.
func (c *snapshotCache) reserve(e *snapshotEntry, n int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Idle snapshots make room, one at a time.
	for c.bytes+n > maxSnapshotBytes || !c.budget.Reserve(budget.Snapshots, int64(n)) {
		if !c.dropOneIdle(e) {
			return false
		}
	}
	c.bytes += n
	e.bytes += n
	c.metrics.snapshotsInFlight(0, n)
	return true
}

// release drops a watcher's hold of e, the entry of key. The last one keeps
// e idle if it is still shared (the cache may have moved to a newer
// version, whose entry of key is another), was built, and keep says a watch
// holds or waits for a snapshot turn; otherwise it drops e.
func (c *snapshotCache) release(key string, e *snapshotEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.refs--; e.refs > 0 {
		return
	}
	if c.entries[key] == e && e.s != nil && e.err == nil && c.idleBytes+e.bytes <= c.maxIdle && c.keep != nil && c.keep() {
		c.idleBytes += e.bytes
		return
	}
	c.drop(key, e)
}

// dropIdle drops the idle snapshots: the turns are all given back, and no
// watch is about to take one of them.
func (c *snapshotCache) dropIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropIdleLocked(nil)
}

// dropIdleLocked drops the idle snapshots but except. c.mu is held.
func (c *snapshotCache) dropIdleLocked(except *snapshotEntry) {
	for key, e := range c.entries {
		if e.refs == 0 && e != except {
			c.idleBytes -= e.bytes
			c.drop(key, e)
		}
	}
}

// dropOneIdle drops an idle snapshot other than except and reports whether
// there was one. c.mu is held.
func (c *snapshotCache) dropOneIdle(except *snapshotEntry) bool {
	for key, e := range c.entries {
		if e.refs == 0 && e != except {
			c.idleBytes -= e.bytes
			c.drop(key, e)
			return true
		}
	}
	return false
}

// drop forgets e, the entry of key no watcher holds, and the bytes reserved
// for it. c.mu is held.
func (c *snapshotCache) drop(key string, e *snapshotEntry) {
	if c.entries[key] == e {
		delete(c.entries, key)
	}
	c.count--
	c.bytes -= e.bytes
	c.budget.Release(budget.Snapshots, int64(e.bytes))
	c.metrics.snapshotsInFlight(-1, -e.bytes)
	e.bytes = 0
}

// sendSnapshot sends an ADDED event for every pod of the snapshot the call
// selects, at the store version c.last. With c.raw, the Stream of a binary
// protobuf watch, it writes the shared snapshot of version in chunks, or
// streams the snapshot when it is not shared (streamSnapshot); otherwise it
// sends the events one at a time through connect. Either way the client
// receives the same messages, and the watch checks between writes whether it
// fell behind or its client left.
func (c *watchCall) sendSnapshot(pods []*store.Pod) error {
	h := c.h
	if c.raw != nil && len(pods) > 0 {
		s, built, release, err := h.snapshots.get(c.last, c.f.name+"|"+c.pr.view+"|"+c.sel.cacheKey(), func(reserve func(int) bool) (*envelopedSnapshot, error) {
			return c.buildSnapshot(pods, reserve)
		})
		// A snapshot that failed to build is streamed, which ends the
		// watch at the failing pod as it always has.
		if err == nil && s != nil {
			// The snapshot is held until it is written, or the write
			// failed: the watchers starting meanwhile share it.
			defer release()
			h.metrics.viewUsed(viewSnapshot, built)
			return c.writeSnapshot(s)
		}
		release()
		return c.streamSnapshot(pods)
	}
	for _, p := range pods {
		if !c.selects(p) {
			continue
		}
		if err := c.check(); err != nil {
			return err
		}
		if err := c.send(store.Added, p, c.last); err != nil {
			return err
		}
	}
	return nil
}

// streamChunk is the most bytes of enveloped events a watch that streams its
// snapshot (streamSnapshot) buffers before it writes them.
const streamChunk = 16 << 10

// streamBuffers are the buffers of the watches streaming their snapshot.
var streamBuffers = sync.Pool{New: func() any { b := make([]byte, 0, streamChunk+streamChunk/4); return &b }}

// streamSnapshot sends the snapshot of a binary protobuf watch whose snapshot
// is not shared (the bounds of the snapshots in flight had no room for it):
// the first event through connect, which writes the response headers, then
// the others enveloped as connect would, into a buffer of its own that is
// written through raw every streamChunk bytes. The client receives the same
// messages as from a shared snapshot, for the cost of a copy of each event
// instead of a message sent through connect; the watch checks between
// writes whether it fell behind or its client left. A pod whose event fails
// to build ends the watch after the events before it, as when the events are
// sent one at a time.
func (c *watchCall) streamSnapshot(pods []*store.Pod) error {
	version := c.last
	bp := streamBuffers.Get().(*[]byte)
	b := (*bp)[:0]
	defer func() {
		if cap(b) <= 4*streamChunk {
			*bp = b[:0]
			streamBuffers.Put(bp)
		}
	}()
	write := func() error {
		if len(b) == 0 {
			return nil
		}
		if err := c.check(); err != nil {
			return err
		}
		if err := c.raw.WriteRaw(b); err != nil {
			return sendErr(c.ctx, errWrite)
		}
		b = b[:0]
		return nil
	}
	first := true
	for _, p := range pods {
		if !c.sel.matches(p) {
			continue
		}
		if first {
			first = false
			if err := c.check(); err != nil {
				return err
			}
			if err := c.send(store.Added, p, version); err != nil {
				return err
			}
			continue
		}
		ev, err := c.h.event(c.f, store.Added, p, c.pr)
		if err == nil {
			var next []byte
			if next, err = appendEnvelope(b, func(b []byte) ([]byte, error) { return c.wire.appendMessage(b, ev, version) }); err == nil {
				b = next
			}
		}
		if err != nil {
			if werr := write(); werr != nil {
				return werr
			}
			return err
		}
		if len(b) >= streamChunk {
			if err := write(); err != nil {
				return err
			}
		}
	}
	return write()
}

// writeSnapshot sends s: its first event through connect, the others in
// chunks through c.raw.
func (c *watchCall) writeSnapshot(s *envelopedSnapshot) error {
	if s.first == nil {
		return nil
	}
	if err := c.check(); err != nil {
		return err
	}
	if err := sendErr(c.ctx, c.wire.send(s.first, c.last)); err != nil {
		return err
	}
	start := 0
	for _, end := range s.chunks {
		if err := c.check(); err != nil {
			return err
		}
		if err := c.raw.WriteRaw(s.rest[start:end]); err != nil {
			return sendErr(c.ctx, errWrite)
		}
		start = end
	}
	return nil
}

// buildSnapshot builds the enveloped snapshot of the pods the call selects,
// at the store version c.last, or
// returns nil when reserve finds no room for it.
func (c *watchCall) buildSnapshot(pods []*store.Pod, reserve func(int) bool) (*envelopedSnapshot, error) {
	version, wire := c.last, c.wire
	var events [][]byte
	size := 0
	for _, p := range pods {
		if !c.sel.matches(p) {
			continue
		}
		ev, err := c.h.event(c.f, store.Added, p, c.pr)
		if err != nil {
			return nil, err
		}
		events = append(events, ev)
		size += len(ev)
	}
	s := &envelopedSnapshot{}
	if len(events) == 0 {
		return s, nil
	}
	s.first = events[0]
	events = events[1:]
	size -= len(s.first)
	// Every message of one snapshot wraps its event alike (the typed wire
	// adds the same revision to each), so the first one tells the size of
	// all.
	msg, err := wire.appendMessage(nil, s.first, version)
	if err != nil {
		return nil, err
	}
	size += len(events) * (envelopeLen + len(msg) - len(s.first))
	if !reserve(size) {
		return nil, nil
	}
	b := make([]byte, 0, size)
	chunk := 0
	for _, ev := range events {
		if b, err = appendEnvelope(b, func(b []byte) ([]byte, error) { return wire.appendMessage(b, ev, version) }); err != nil {
			return nil, err
		}
		if len(b)-chunk >= snapshotChunk {
			chunk = len(b)
			s.chunks = append(s.chunks, chunk)
		}
	}
	if chunk < len(b) {
		s.chunks = append(s.chunks, len(b))
	}
	s.rest = b
	return s, nil
}
