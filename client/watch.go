package client

import (
	"context"
	"errors"
	"fmt"
	"io"

	"connectrpc.com/connect"
	corev1 "k8s.io/api/core/v1"
)

// EventType says what a watch event reports.
type EventType int

const (
	// Added reports a pod new to the watcher: part of the initial snapshot,
	// or a pod that appeared later.
	Added EventType = iota + 1
	// Modified reports a new state of a pod the watcher knows.
	Modified
	// Deleted reports a pod that is gone, with its last known state.
	Deleted
	// Synced follows the initial snapshot of Added events (the server's
	// EVENT_TYPE_INITIAL_SYNC_COMPLETE): the watcher now knows every current
	// pod. Its event has no pod.
	Synced
)

// String returns the name of the event type: ADDED, MODIFIED, DELETED or
// SYNCED.
func (t EventType) String() string {
	switch t {
	case Added:
		return "ADDED"
	case Modified:
		return "MODIFIED"
	case Deleted:
		return "DELETED"
	case Synced:
		return "SYNCED"
	default:
		return fmt.Sprintf("EventType(%d)", int(t))
	}
}

// Event is one event of a watch.
type Event struct {
	// Type says what happened.
	Type EventType
	// Pod is the pod the event is about, trimmed by the field mask; nil for
	// Synced.
	Pod *corev1.Pod
}

// Watcher is an open watch. Its methods must be called from one goroutine.
type Watcher struct {
	stream  *connect.ServerStreamForClient[watchResponse]
	cancel  context.CancelFunc
	pending *Event // the first event, received by Watch
	err     error
}

// Watch opens a watch of the node's pods: one Added event per current pod,
// one Synced event, then live Added, Modified and Deleted events in the
// order they happened. Watch waits for the first event, so that an error of
// the server (ErrNotSynced, an invalid field mask, a missing socket) is
// returned by Watch itself. Close the Watcher, or cancel ctx, to end it.
func (c *Client) Watch(ctx context.Context, opts ...CallOption) (*Watcher, error) {
	ctx, cancel := context.WithCancel(ctx)
	stream, err := c.watch.CallServerStream(ctx, newRequest(&emptyRequest{}, newCallOptions(opts)))
	if err != nil {
		cancel()
		return nil, wrapError(err, true)
	}
	w := &Watcher{stream: stream, cancel: cancel}
	ev, err := w.receive()
	if err != nil {
		w.Close()
		return nil, err
	}
	w.pending = &ev
	return w, nil
}

// Next returns the next event. When the watch ends it returns the error
// that ended it, every time: the server's (wrapping ErrFellBehind when the
// watcher was dropped for falling behind; UNAVAILABLE when the server shuts
// down), the context's, or io.EOF if the server ended the stream without
// one. Watch again to resume.
func (w *Watcher) Next() (Event, error) {
	if w.pending != nil {
		ev := *w.pending
		w.pending = nil
		return ev, nil
	}
	if w.err != nil {
		return Event{}, w.err
	}
	ev, err := w.receive()
	if err != nil {
		w.err = err
	}
	return ev, err
}

// receive reads one event from the stream.
func (w *Watcher) receive() (Event, error) {
	if !w.stream.Receive() {
		err := w.stream.Err()
		if err == nil {
			err = io.EOF
		}
		return Event{}, wrapError(err, true)
	}
	msg := w.stream.Msg()
	switch msg.typ {
	case 1, 2, 3:
		if msg.pod == nil {
			return Event{}, fmt.Errorf("client: watch event of type %d without a pod", msg.typ)
		}
		return Event{Type: EventType(msg.typ), Pod: msg.pod}, nil
	case 4:
		return Event{Type: Synced}, nil
	default:
		return Event{}, errors.New("client: watch event of unknown type " + fmt.Sprint(msg.typ))
	}
}

// Close ends the watch and releases its resources. It returns nil.
func (w *Watcher) Close() error {
	w.cancel()
	w.stream.Close()
	return nil
}
