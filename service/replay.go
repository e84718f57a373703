package service

import (
	"container/list"
	"errors"
	"strconv"
	"sync"

	"github.com/podsapi/podsapi/budget"
	"github.com/podsapi/podsapi/store"
)

// replayBlock is the number of consecutive changes of the history enveloped
// together and shared by the resumed watches (store versions k·replayBlock+1
// to (k+1)·replayBlock): watches resuming from nearby revisions share every
// block but the one they resume in, which they share from their revision on,
// and the last, not yet complete, which each sends one change at a time.
const replayBlock = 128

// envelopedReplay is one block of the history, enveloped for one wire, field mask
// and selection: the enveloped message of every change the watch sends, as
// the snapshot's are, ready for the socket.
type envelopedReplay struct {
	b []byte
	// ends[i] is the end in b of the messages of the block's changes up to
	// its i-th (some changes send nothing: a selector or a mask hides
	// them).
	ends [replayBlock]int
}

// replayCache holds the enveloped blocks of the history in use by resumed
// watches, and those used last, as long as the memory budget allows: a block
// is built once for every watch that resumes across it meanwhile. A block in
// use is never dropped; idle ones are dropped oldest first when a new block
// does not fit, and beyond maxIdle bytes.
type replayCache struct {
	mu        sync.Mutex
	entries   map[string]*replayEntry
	idle      list.List // of *replayEntry, oldest first
	idleBytes int64
	budget    *budget.Budget
	// maxIdle bounds the bytes of the idle blocks kept.
	maxIdle int64
	metrics *Metrics
}

// replayEntry is one enveloped block, built once.
type replayEntry struct {
	key   string
	once  sync.Once
	r     *envelopedReplay
	err   error
	refs  int
	bytes int64
	// client is charged for the bytes: the client whose watch built it.
	client string
	// elem is the entry's place in idle while no watch uses it.
	elem *list.Element
}

// errBlockTooOld says a block's first changes left the history: the watch
// sends what is left of it one change at a time.
var errBlockTooOld = errors.New("the block left the history")

// get returns the enveloped block of key, building it with build unless it is
// cached, and a function that releases it, which the caller must call once
// done with the block. build returns the block and its size; the size is
// charged to client. get fails with budget.ErrOverShare or ErrOverBudget
// when the block does not fit, or with build's error.
func (c *replayCache) get(key, client string, build func() (*envelopedReplay, int64, error)) (*envelopedReplay, func(), error) {
	c.mu.Lock()
	if c.entries == nil {
		c.entries = make(map[string]*replayEntry)
	}
	e, ok := c.entries[key]
	if !ok {
		e = &replayEntry{key: key, client: client}
		c.entries[key] = e
	}
	if e.elem != nil {
		c.idle.Remove(e.elem)
		c.idleBytes -= e.bytes
		e.elem = nil
	}
	e.refs++
	c.mu.Unlock()
	built := false
	e.once.Do(func() {
		built = true
		var size int64
		e.r, size, e.err = build()
		if e.err == nil {
			e.err = c.reserve(e, size)
		}
		if e.err != nil {
			e.r = nil
		}
	})
	c.metrics.viewUsed(viewReplay, built)
	release := func() { c.release(e) }
	if err := e.err; err != nil {
		release()
		if errors.Is(err, budget.ErrOverShare) && e.client != client {
			// Over the share of the client that built it, not this
			// one's: this watch sends the block one change at a time.
			err = budget.ErrOverBudget
		}
		return nil, func() {}, err
	}
	return e.r, release, nil
}

// reserve charges size bytes for e to its client, dropping idle blocks to
// make room.
func (c *replayCache) reserve(e *replayEntry, size int64) error {
	for {
		err := c.budget.ReserveFor(e.client, budget.Replays, size)
		if err == nil {
			c.mu.Lock()
			e.bytes = size
			c.mu.Unlock()
			return nil
		}
		// Idle blocks count against the budget and their builders'
		// shares: drop them, oldest first, before refusing.
		if !c.dropOldestIdle() {
			return err
		}
	}
}

// dropOldestIdle drops the oldest idle block and reports whether there was
// one.
func (c *replayCache) dropOldestIdle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	front := c.idle.Front()
	if front == nil {
		return false
	}
	c.drop(front.Value.(*replayEntry))
	return true
}

// drop removes the idle entry e. c.mu is held.
func (c *replayCache) drop(e *replayEntry) {
	c.idle.Remove(e.elem)
	e.elem = nil
	c.idleBytes -= e.bytes
	if c.entries[e.key] == e {
		delete(c.entries, e.key)
	}
	c.budget.ReleaseFor(e.client, budget.Replays, e.bytes)
	e.bytes = 0
}

// release drops a watch's hold of e. An entry without holders stays idle,
// unless it failed to build or the idle blocks are over their bound.
func (c *replayCache) release(e *replayEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.refs--; e.refs > 0 {
		return
	}
	if e.err != nil || e.bytes == 0 {
		if c.entries[e.key] == e {
			delete(c.entries, e.key)
		}
		return
	}
	e.elem = c.idle.PushBack(e)
	c.idleBytes += e.bytes
	for c.idleBytes > c.maxIdle && c.idle.Len() > 0 {
		c.drop(c.idle.Front().Value.(*replayEntry))
	}
}

// sendReplay sends the changes of r that the watch selects, after c.last,
// and moves c.last to each change it handled. The first message goes through
// connect, which writes the response headers; after it, with c.raw (the Stream
// of a binary protobuf watch), every complete block of the history is written
// from the blocks shared between watches; the rest goes one change at a time.
func (c *watchCall) sendReplay(r store.Replay) error {
	h := c.h
	buf := make([]store.Event, 0, replayBlock)
	headersSent := false
	// unshared is the block the budget or the history refused to share:
	// it goes one change at a time.
	unshared := ^uint64(0)
	for c.last < r.Until {
		if err := c.check(); err != nil {
			return err
		}
		block := c.last / replayBlock
		end := (block + 1) * replayBlock
		shareable := c.raw != nil && end <= r.Until && block != unshared
		if shareable && headersSent {
			done, err := c.writeReplayBlock(block)
			if err != nil {
				return err
			}
			if done {
				c.last = end
				continue
			}
			unshared, shareable = block, false
		}
		events, err := h.store.ReadHistory(c.last, min(end, r.Until), buf)
		if err != nil {
			return errReplayTooOld(h.store.Revision(c.last), err)
		}
		for _, ev := range events {
			if err := c.check(); err != nil {
				return err
			}
			sent, err := c.deliver(ev)
			if err != nil {
				return err
			}
			c.last = ev.Version
			if sent && !headersSent {
				headersSent = true
				if shareable {
					// The rest of the block is shared.
					break
				}
			}
		}
		buf = events
	}
	return nil
}

// writeReplayBlock writes the messages of block after the change at store
// version c.last, from the shared enveloped block, moving c.last to the last
// change written, and reports whether it wrote the block to its end:
// not when the block left the history or the budget has no room for it, in
// which case the watch sends it one change at a time.
func (c *watchCall) writeReplayBlock(block uint64) (bool, error) {
	h, after := c.h, c.last
	key := c.f.name + "|" + c.pr.view + "|" + c.sel.cacheKey() + "|" + strconv.FormatUint(block, 10)
	r, release, err := h.replays.get(key, c.client, func() (*envelopedReplay, int64, error) {
		return c.envelopeReplay(block)
	})
	switch {
	case errors.Is(err, budget.ErrOverShare):
		return false, errMemoryShare(h.store.Revision(after))
	case errors.Is(err, budget.ErrOverBudget), errors.Is(err, errBlockTooOld):
		return false, nil
	case err != nil:
		return false, err
	}
	defer release()
	// The changes of the block after after, from its i-th on.
	i, pos := int(after-block*replayBlock), 0
	if i > 0 {
		pos = r.ends[i-1]
	}
	for j := i; j < replayBlock; j++ {
		end := r.ends[j]
		if end == pos || (end-pos < snapshotChunk && j < replayBlock-1) {
			continue
		}
		if err := c.check(); err != nil {
			return false, err
		}
		if err := c.raw.WriteRaw(r.b[pos:end]); err != nil {
			return false, sendErr(c.ctx, errWrite)
		}
		// Every change up to the j-th of the block was sent: a watch
		// dropped now resumes after it.
		pos, c.last = end, block*replayBlock+uint64(j)+1
	}
	return true, nil
}

// envelopeReplay envelopes the changes of block as the call's mask and
// selector see them, and returns the block and its size in bytes.
func (c *watchCall) envelopeReplay(block uint64) (*envelopedReplay, int64, error) {
	h := c.h
	events, err := h.store.ReadHistory(block*replayBlock, (block+1)*replayBlock, make([]store.Event, 0, replayBlock))
	if err != nil || len(events) != replayBlock {
		return nil, 0, errBlockTooOld
	}
	r := &envelopedReplay{}
	for i, ev := range events {
		t, p, ok, err := h.eventFor(ev, c.pr, c.sel)
		if err != nil {
			return nil, 0, err
		}
		if ok {
			msg, err := h.event(c.f, t, p, c.pr)
			if err != nil {
				return nil, 0, err
			}
			if r.b, err = appendEnvelope(r.b, func(b []byte) ([]byte, error) { return c.wire.appendMessage(b, msg, ev.Version) }); err != nil {
				return nil, 0, err
			}
		}
		r.ends[i] = len(r.b)
	}
	return r, int64(cap(r.b)) + replayOverhead, nil
}

// replayOverhead is what a enveloped block costs beside its bytes.
const replayOverhead = 8*replayBlock + 256
