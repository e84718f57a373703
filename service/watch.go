package service

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/podsapi/podsapi/store"
)

// identityPaths are always part of a watch's field mask, so that every event
// says which pod it is about.
var identityPaths = []string{"metadata.namespace", "metadata.name", "metadata.uid"}

// maxRevisionLen bounds resume_from, in bytes: longer is not a revision.
const maxRevisionLen = 64

// watchOptions are what a watch request asks beside its field mask.
type watchOptions struct {
	// sel selects the pods; nil selects every pod.
	sel *selector
	// resumeFrom, when not empty, replaces the snapshot with the changes
	// after that revision.
	resumeFrom string
	// progress asks for progress marks.
	progress bool
	// revisions says the wire carries revisions: FELL_BEHIND then tells
	// the revision to resume from.
	revisions bool
	// workloads is what the call asks of workloads (typed wire only).
	workloads workloadOptions
}

// watchWire is how the messages of one wire's watch carry its events.
type watchWire struct {
	// send sends the message of the event ev at store version version
	// through connect, and is done with ev when it returns.
	send func(ev []byte, version uint64) error
	// appendMessage appends to b the message of the event ev at store
	// version version, encoded as connect's binary codec encodes it.
	appendMessage func(b, ev []byte, version uint64) ([]byte, error)
	// binary says the messages travel as binary protobuf: the watch may
	// envelope them itself (binaryEnvelopes).
	binary bool
}

// newWatchWire returns the watchWire of stream, which sends the message
// that message returns for an event and store version.
func newWatchWire[R any, M interface {
	*R
	proto.Message
}](stream *connect.ServerStream[R], message func(ev []byte, version uint64) M) watchWire {
	return watchWire{
		binary: binaryEnvelopes(stream.Conn().RequestHeader()),
		send:   func(ev []byte, version uint64) error { return stream.Send(message(ev, version)) },
		appendMessage: func(b, ev []byte, version uint64) ([]byte, error) {
			// connect's binary codec marshals with these options.
			return proto.MarshalOptions{}.MarshalAppend(b, message(ev, version))
		},
	}
}

// watch streams the selected pods (or the changes after opts.resumeFrom),
// the sync marker, then every change, each encoded by f and sent through
// wire together with the store version it reflects.
func (h *handler) watch(ctx context.Context, f eventEncoding, opts watchOptions, wire watchWire) error {
	pr, err := h.watchProjection(maskFrom(ctx))
	if err != nil {
		return errFieldMask(err)
	}
	client := h.clientOf(ctx)
	if pr.mask != nil {
		uncount, err := h.masks.acquire(client, pr.view)
		if err != nil {
			return err
		}
		defer uncount()
	}
	// The client's turn to send a snapshot (or a replay), taken before the
	// store's snapshot so that a watch waiting for it holds nothing.
	turn, err := h.turns.take(ctx, client, h.shutdown)
	if err != nil {
		return sendErr(ctx, err)
	}
	defer turn.end()
	var (
		snapshot []*store.Pod
		replay   store.Replay
		w        *store.Watcher
	)
	if opts.resumeFrom != "" {
		if len(opts.resumeFrom) > maxRevisionLen {
			return errResume(opts.resumeFrom, nil)
		}
		var err error
		if replay, w, err = h.store.WatchFrom(opts.resumeFrom, h.queue, h.metrics.droppedEvents); err != nil {
			return errResume(opts.resumeFrom, err)
		}
	} else {
		snapshot, w = h.store.Watch(h.queue, h.metrics.droppedEvents)
	}
	defer w.Stop()
	c := &watchCall{h: h, ctx: ctx, f: f, wire: wire, w: w, pr: pr, sel: opts.sel, client: client, revisions: opts.revisions, last: w.Since()}
	// Registered before the snapshot is sent: a workload that changes
	// meanwhile is sent after it.
	c.wl = h.newWorkloadWatch(opts.workloads)
	defer c.wl.end()
	if opts.resumeFrom != "" {
		c.last, c.resumable = replay.After, true
		c.holdAll()
	}
	var tick <-chan struct{}
	if opts.progress {
		tick = h.progress.subscribe()
		defer h.progress.unsubscribe()
	}

	// Events that are ready together go out with one flush: the snapshot
	// or the replayed changes, then whatever the queue holds each time the
	// watch wakes up.
	stream, raw := h.stream(ctx)
	// The shared snapshot is written raw only to a stream of binary
	// protobuf envelopes whose events are those of every other watch: not
	// with workloads, which are looked up as each event is sent.
	if raw && wire.binary && c.wl == nil {
		c.raw = turnStream{stream, turn}
	}
	stream.Hold()
	if err := c.sendSnapshot(snapshot); err != nil {
		return err
	}
	if err := c.sendReplay(replay); err != nil {
		return err
	}
	if err := sendErr(ctx, wire.send(f.synced, c.last)); err != nil {
		return err
	}
	c.resumable = true
	turn.end()
	stream.Release()
	return c.live(stream, tick)
}

// eventFor returns the type and pod of the event a watcher with sel and pr
// gets for ev, or false when it gets none. With a selector, as the API
// server does: a pod that starts to match is ADDED, one that stops matching
// is DELETED with its new state, and a MODIFIED is sent only while the pod
// matches; a MODIFIED that the field mask hides whole is not sent.
func (h *handler) eventFor(ev store.Event, pr *projection, sel *selector) (store.EventType, *store.Pod, bool, error) {
	t, ok := selectedType(ev, sel)
	if !ok {
		return t, nil, false, nil
	}
	if t == store.Modified && pr.mask != nil {
		same, err := h.sameView(ev.Prev, ev.Pod, pr)
		if err != nil || same {
			return t, nil, false, err
		}
	}
	return t, ev.Pod, true, nil
}

// selectedType returns the type of the event a watcher with sel gets for
// ev, or false when it gets none: as the API server does, a pod that starts
// to match is ADDED, one that stops matching is DELETED with its new state,
// and a MODIFIED is sent only while the pod matches.
func selectedType(ev store.Event, sel *selector) (store.EventType, bool) {
	t := ev.Type
	if sel == nil {
		return t, true
	}
	if ev.Type != store.Modified {
		return t, sel.matches(ev.Pod)
	}
	before, after := sel.matches(ev.Prev), sel.matches(ev.Pod)
	switch {
	case !before && !after:
		return t, false
	case !before:
		return store.Added, true
	case !after:
		return store.Deleted, true
	}
	return t, true
}

// event returns the event of type t about p encoded by f, built once per pod
// version, event type, mask and wire.
func (h *handler) event(f eventEncoding, t store.EventType, p *store.Pod, pr *projection) ([]byte, error) {
	built := false
	ev, err := p.View(pr.events[f.id][t], func([]byte) ([]byte, error) {
		built = true
		v, err := h.view(p, pr)
		if err != nil {
			return nil, err
		}
		return f.event(t, v), nil
	})
	h.metrics.viewUsed(viewWatch, built)
	return ev, err
}

// sameView reports whether two versions of a pod look the same through pr.
func (h *handler) sameView(a, b *store.Pod, pr *projection) (bool, error) {
	va, err := h.view(a, pr)
	if err != nil {
		return false, err
	}
	vb, err := h.view(b, pr)
	if err != nil {
		return false, err
	}
	return string(va) == string(vb), nil
}

// sendErr turns the error of a failed send into the code the watch ends
// with: CANCELED when the client left.
func sendErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return connect.NewError(connect.CodeCanceled, errors.New("the client ended the watch"))
	}
	return err
}
