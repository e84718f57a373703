package service

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1"
	"github.com/podsapi/podsapi/store"
)

// identityPaths are always part of a watch's field mask, so that every event
// says which pod it is about.
var identityPaths = []string{"metadata.namespace", "metadata.name", "metadata.uid"}

// eventTypes maps the store's event types to the API's.
var eventTypes = map[store.EventType]podsv1alpha1.EventType{
	store.Added:    podsv1alpha1.EventType_EVENT_TYPE_ADDED,
	store.Modified: podsv1alpha1.EventType_EVENT_TYPE_MODIFIED,
	store.Deleted:  podsv1alpha1.EventType_EVENT_TYPE_DELETED,
}

// WatchPods streams the current pods, the sync marker, then every change.
func (h *handler) WatchPods(ctx context.Context, _ *connect.Request[podsv1alpha1.PodWatchRequest], stream *connect.ServerStream[podsv1alpha1.PodWatchResponse]) error {
	mask := maskFrom(ctx)
	if mask != nil {
		var err error
		if mask, err = mask.Union(identityPaths...); err != nil {
			return errFieldMask(err)
		}
	}
	pr := newProjection(mask)
	// One response message serves every send: connect encodes it before
	// Send returns.
	resp := &podsv1alpha1.PodWatchResponse{}
	snapshot, w := h.store.Watch(h.queue, h.metrics.droppedEvents)
	defer w.Stop()

	// Events that are ready together go out with one flush: the snapshot,
	// then whatever the queue holds each time the watch wakes up.
	batch := batchFrom(ctx)
	batch.hold()
	for _, p := range snapshot {
		if err := h.check(ctx, w); err != nil {
			return err
		}
		if err := h.send(ctx, stream, resp, store.Added, p, pr); err != nil {
			return err
		}
	}
	synced := withRaw(&podsv1alpha1.PodWatchResponse{}, appendType(nil, podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE))
	if err := sendErr(ctx, stream.Send(synced)); err != nil {
		return err
	}
	batch.release()
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
			batch.hold()
			for _, ev := range events {
				if err := h.checkLive(ctx); err != nil {
					return err
				}
				if err := h.deliver(ctx, stream, resp, ev, pr); err != nil {
					return err
				}
			}
			batch.release()
		}
	}
}

// deliver sends ev, unless a field mask hides the whole change.
func (h *handler) deliver(ctx context.Context, stream *connect.ServerStream[podsv1alpha1.PodWatchResponse], resp *podsv1alpha1.PodWatchResponse, ev store.Event, pr *projection) error {
	if ev.Type == store.Modified && pr.mask != nil {
		same, err := h.sameView(ev.Prev, ev.Pod, pr)
		if err != nil || same {
			return err
		}
	}
	return h.send(ctx, stream, resp, ev.Type, ev.Pod, pr)
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

// send sends one event about p. The framed event is built once per pod
// version, event type and mask, and shared by every watcher.
func (h *handler) send(ctx context.Context, stream *connect.ServerStream[podsv1alpha1.PodWatchResponse], resp *podsv1alpha1.PodWatchResponse, t store.EventType, p *store.Pod, pr *projection) error {
	built := false
	ev, err := p.View(pr.events[t], func([]byte) ([]byte, error) {
		built = true
		v, err := h.view(p, pr)
		if err != nil {
			return nil, err
		}
		b := make([]byte, 0, protowire.SizeTag(podField)+protowire.SizeBytes(len(v))+protowire.SizeTag(typeField)+1)
		return appendType(appendPod(b, v), eventTypes[t]), nil
	})
	h.metrics.viewUsed(viewWatch, built)
	if err != nil {
		return err
	}
	return sendErr(ctx, stream.Send(withRaw(resp, ev)))
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

// appendType appends t as PodWatchResponse.type.
func appendType(b []byte, t podsv1alpha1.EventType) []byte {
	b = protowire.AppendTag(b, typeField, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(t))
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
