package service

import (
	"context"

	"github.com/podsapi/podsapi/store"
)

// watchCall is the state of one WatchPods call, on either wire: what it
// selects and how it encodes, where it writes, how far it has come, and
// whether its watcher fell behind. Its methods send the snapshot
// (snapshot.go), the replay of a resumed watch (replay.go) and the live
// changes (live), each checking between writes whether the watch must end.
type watchCall struct {
	h   *handler
	ctx context.Context
	// f encodes the events of the call's wire, and wire carries them.
	f    eventEncoding
	wire watchWire
	// raw is the Stream the shared snapshots and replay blocks are written
	// to, or nil when the watch sends every event through connect (not a
	// stream of binary protobuf envelopes).
	raw Stream
	// w is the call's watcher of the store.
	w *store.Watcher
	// pr is the call's field mask, and sel its selector (nil selects every
	// pod).
	pr  *projection
	sel *selector
	// wl is the call's state of workloads, nil when it asks nothing of
	// them.
	wl *workloadWatch
	// client is the caller's workload, whose share of the caches the call
	// takes.
	client string
	// revisions says the wire carries revisions: FELL_BEHIND then tells
	// the revision to resume from.
	revisions bool
	// last is the store version up to which the watcher has been sent
	// every change it selects; resumable says the client can resume from
	// it, which it cannot while it has only part of a snapshot.
	last      uint64
	resumable bool
}

// fellBehind returns the error of a watcher that was dropped: FELL_BEHIND,
// with the revision to resume from when the client can resume.
func (c *watchCall) fellBehind() error {
	rev := ""
	if c.revisions && c.resumable {
		rev = c.h.store.Revision(c.last)
	}
	return errFellBehind(c.w.Lost(), rev)
}

// check returns the error that ends the watch now, if any: its watcher was
// dropped, its client left or the server is shutting down.
func (c *watchCall) check() error {
	select {
	case <-c.w.Dropped():
		return c.fellBehind()
	default:
		return c.checkLive()
	}
}

// checkLive returns the error that ends the watch now because its client
// left or the server is shutting down, if any.
func (c *watchCall) checkLive() error {
	select {
	case <-c.ctx.Done():
		return sendErr(c.ctx, c.ctx.Err())
	case <-c.h.shutdown:
		return errShuttingDown
	default:
		return nil
	}
}

// deliver sends ev as the call's selector sees it, unless the field mask
// hides the whole change, and reports whether it sent it.
func (c *watchCall) deliver(ev store.Event) (bool, error) {
	if c.wl != nil {
		t, ok, err := c.workloadEventFor(ev)
		if err != nil || !ok {
			return false, err
		}
		return true, c.send(t, ev.Pod, ev.Version)
	}
	t, p, ok, err := c.h.eventFor(ev, c.pr, c.sel)
	if err != nil || !ok {
		return false, err
	}
	return true, c.send(t, p, ev.Version)
}

// send sends one event about p through connect, at store version version.
// The event is built once per pod version, event type, mask and wire, and
// shared by every watcher; the pod's view inside it is shared by both
// wires.
func (c *watchCall) send(t store.EventType, p *store.Pod, version uint64) error {
	ev, err := c.h.event(c.f, t, p, c.pr)
	if err != nil {
		return err
	}
	if c.wl != nil {
		ev = c.withWorkload(ev, t, p.UID)
	}
	return sendErr(c.ctx, c.wire.send(ev, version))
}

// live sends the changes of the store as they come, a progress mark at each
// tick (nil for none), until the client leaves, the server shuts down or the
// watcher is dropped. Events that are ready together go out with one flush
// of stream.
func (c *watchCall) live(stream Stream, tick <-chan struct{}) error {
	var events []store.Event
	for {
		select {
		case <-c.ctx.Done():
			return sendErr(c.ctx, c.ctx.Err())
		case <-c.h.shutdown:
			return errShuttingDown
		case <-c.w.Dropped():
			return c.fellBehind()
		case <-tick:
			// The watcher has been sent every change it selects up to
			// the last event it handled, which every change reaches.
			tick = c.h.progress.next()
			if err := sendErr(c.ctx, c.wire.send(c.f.progress, c.last)); err != nil {
				return err
			}
		case <-c.wl.changes():
			stream.Hold()
			if err := c.sendWorkloadChanges(); err != nil {
				return err
			}
			stream.Release()
		case <-c.w.Ready():
			// Every event taken here was queued before any drop, so it is
			// delivered: the events a drop loses are those still queued.
			events = c.w.Take(events)
			stream.Hold()
			for _, ev := range events {
				if err := c.checkLive(); err != nil {
					return err
				}
				if _, err := c.deliver(ev); err != nil {
					return err
				}
				c.last = ev.Version
			}
			stream.Release()
		}
	}
}
