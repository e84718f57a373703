package service

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/podsapi/podsapi/store"
)

// identityPaths are always part of a watch's field mask, so that every event
// says which pod it is about.
var identityPaths = []string{"metadata.namespace", "metadata.name", "metadata.uid"}

// watch streams the current pods, the sync marker, then every change, each
// framed by f and written with send. send must be done with its argument
// when it returns.
func (h *handler) watch(ctx context.Context, f framing, send func(ev []byte) error) error {
	mask := maskFrom(ctx)
	if mask != nil {
		var err error
		if mask, err = mask.Union(identityPaths...); err != nil {
			return errFieldMask(err)
		}
	}
	pr := newProjection(mask)
	snapshot, w := h.store.Watch(h.queue, h.metrics.droppedEvents)
	defer w.Stop()

	// Events that are ready together go out with one flush: the snapshot,
	// then whatever the queue holds each time the watch wakes up.
	batch := batcherFrom(ctx)
	batch.Hold()
	for _, p := range snapshot {
		if err := h.check(ctx, w); err != nil {
			return err
		}
		if err := h.send(ctx, f, send, store.Added, p, pr); err != nil {
			return err
		}
	}
	if err := sendErr(ctx, send(f.synced)); err != nil {
		return err
	}
	batch.Release()
	var events []store.Event
	for {
		select {
		case <-ctx.Done():
			return sendErr(ctx, ctx.Err())
		case <-h.shutdown:
			return errShuttingDown
		case <-w.Dropped():
			return errFellBehind(w.Lost())
		case <-w.Ready():
			// Every event taken here was queued before any drop, so it is
			// delivered: the events a drop loses are those still queued.
			events = w.Take(events)
			batch.Hold()
			for _, ev := range events {
				if err := h.checkLive(ctx); err != nil {
					return err
				}
				if err := h.deliver(ctx, f, send, ev, pr); err != nil {
					return err
				}
			}
			batch.Release()
		}
	}
}

// deliver sends ev, unless a field mask hides the whole change.
func (h *handler) deliver(ctx context.Context, f framing, send func([]byte) error, ev store.Event, pr *projection) error {
	if ev.Type == store.Modified && pr.mask != nil {
		same, err := h.sameView(ev.Prev, ev.Pod, pr)
		if err != nil || same {
			return err
		}
	}
	return h.send(ctx, f, send, ev.Type, ev.Pod, pr)
}

// check returns the error that ends the watch now, if any.
func (h *handler) check(ctx context.Context, w *store.Watcher) error {
	select {
	case <-w.Dropped():
		return errFellBehind(w.Lost())
	default:
		return h.checkLive(ctx)
	}
}

// checkLive returns the error that ends the watch now because its client
// left or the server is shutting down, if any.
func (h *handler) checkLive(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return sendErr(ctx, ctx.Err())
	case <-h.shutdown:
		return errShuttingDown
	default:
		return nil
	}
}

// send sends one event about p. The event framed by f is built once per pod
// version, event type, mask and framing, and shared by every watcher; the
// pod's view inside it is shared by both framings.
func (h *handler) send(ctx context.Context, f framing, send func([]byte) error, t store.EventType, p *store.Pod, pr *projection) error {
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
	if err != nil {
		return err
	}
	return sendErr(ctx, send(ev))
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
