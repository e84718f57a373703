package client

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	corev1 "k8s.io/api/core/v1"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/podtypes"
)

// EventType says what a watch event reports (podtypes.EventType, which the
// server's store shares).
type EventType = podtypes.EventType

// The types of watch events.
const (
	// Added reports a pod new to the watcher: part of the initial snapshot,
	// or a pod that appeared later.
	Added = podtypes.Added
	// Modified reports a new state of a pod the watcher knows.
	Modified = podtypes.Modified
	// Deleted reports a pod that is gone, with its last known state (a
	// kubelet's carries only the pod's namespace, name and UID).
	Deleted = podtypes.Deleted
	// Synced follows the initial snapshot of Added events (the server's
	// EVENT_TYPE_INITIAL_SYNC_COMPLETE): the watcher now knows every current
	// pod. Its event has no pod.
	Synced = podtypes.Synced
)

// Event is one event of a watch.
type Event struct {
	// Type says what happened.
	Type EventType
	// Pod is the pod the event is about, trimmed by the field mask; nil for
	// Synced.
	Pod *corev1.Pod
	// Revision is the revision of the server's store after the event (the
	// snapshot's, for its Added events): resume from it with WithResumeFrom
	// (from Synced or a later event). It is "" on a server without
	// revisions (WireKubelet, an older podsapi).
	Revision string
	// Workload is the workload of the pod, with WithWorkloads, from a
	// server that resolves one for the pod; nil otherwise.
	Workload *podsv1alpha1.PodWorkload
}

// Watcher is an open watch. Its methods must be called from one goroutine.
type Watcher struct {
	stream  eventStream
	cancel  context.CancelFunc
	pending *Event // the first event, received by Watch
	err     error
}

// eventStream is the stream of events of one wire.
type eventStream interface {
	// receive returns the next event, or the error that ended the stream.
	receive() (Event, error)
	// close releases the stream.
	close()
}

// Watch opens a watch of the node's pods: one Added event per current pod,
// one Synced event, then live Added, Modified and Deleted events in the
// order they happened. Watch waits for the first event, so that an error of
// the server (ErrNotSynced, an invalid field mask, a missing socket) is
// returned by Watch itself. Close the Watcher, or cancel ctx, to end it.
//
// On WireKubelet, the snapshot comes in the kubelet's order (podsapi sends
// it sorted by namespace, name and UID), and a kubelet's Deleted events
// carry only the pod's namespace, name and UID.
func (c *Client) Watch(ctx context.Context, opts ...CallOption) (*Watcher, error) {
	wire, err := c.Wire(ctx)
	if err != nil {
		return nil, wrapError(err, true)
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	var stream eventStream
	o := newCallOptions(opts)
	m, err := newMatcher(o.selection)
	if err != nil {
		cancel()
		return nil, err
	}
	if wire == WireKubelet {
		if o.workloads != nil {
			cancel()
			return nil, errWorkloadSelector
		}
		stream, err = c.watchKubelet(ctx, o, m)
	} else {
		stream, err = c.watchTyped(ctx, o, m)
	}
	if err != nil {
		cancel()
		c.forget(wire, err)
		return nil, err
	}
	w := &Watcher{stream: stream, cancel: cancel}
	ev, err := w.stream.receive()
	if err != nil {
		w.Close()
		c.forget(wire, err)
		return nil, err
	}
	if wire != WireKubelet && m != nil && ev.Revision == "" && o.header() != "" {
		// A server without selectors, which masked the pods the client
		// must select: watch whole pods, and mask them here.
		w.Close()
		return c.watchWhole(parent, o, m)
	}
	w.pending = &ev
	return w, nil
}

// watchTyped opens the stream of Watch on the typed wire.
func (c *Client) watchTyped(ctx context.Context, o callOptions, m *matcher) (eventStream, error) {
	stream, err := c.watch.CallServerStream(ctx, newRequest(o.watchRequest(), o))
	if err != nil {
		return nil, wrapError(err, true)
	}
	s := &typedEventStream{stream: stream}
	if m != nil {
		s.filter = newEventFilter(m)
	}
	return s, nil
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
	ev, err := w.stream.receive()
	if err != nil {
		w.err = err
	}
	return ev, err
}

// typedEventStream is the stream of a watch on the typed wire.
type typedEventStream struct {
	stream *connect.ServerStreamForClient[watchResponse]
	// filter applies the selectors to the events of a server without
	// selectors (told by events without a revision); nil without selectors.
	filter *eventFilter
	// dec applies the mask after filter, when the server was asked for
	// whole pods (watchWhole); nil otherwise.
	dec *podDecoder
}

func (s *typedEventStream) receive() (Event, error) {
	for {
		if !s.stream.Receive() {
			return Event{}, streamError(s.stream.Err())
		}
		msg := s.stream.Msg()
		if msg.typ == 5 {
			continue // EVENT_TYPE_PROGRESS, which the client does not ask for
		}
		typ, err := eventType(msg.typ)
		if err != nil {
			return Event{}, err
		}
		if typ == Synced {
			return Event{Type: Synced, Revision: msg.revision}, nil
		}
		if msg.pod == nil {
			return Event{}, fmt.Errorf("client: watch event of type %d without a pod", msg.typ)
		}
		ev := Event{Type: typ, Pod: msg.pod, Revision: msg.revision, Workload: msg.workload}
		if s.filter != nil && msg.revision == "" {
			var ok bool
			if ev, ok = s.filter.apply(ev); !ok {
				continue
			}
			if s.dec != nil {
				if ev.Pod, err = project(s.dec, ev.Pod); err != nil {
					return Event{}, err
				}
			}
		}
		return ev, nil
	}
}

func (s *typedEventStream) close() { s.stream.Close() }

// eventType returns the EventType of an event's type on the wire. Both
// wires number the types alike: ADDED 1, MODIFIED 2, DELETED 3,
// INITIAL_SYNC_COMPLETE 4.
func eventType(typ uint64) (EventType, error) {
	switch typ {
	case 1, 2, 3:
		return EventType(typ), nil
	case 4:
		return Synced, nil
	default:
		return 0, errors.New("client: watch event of unknown type " + fmt.Sprint(typ))
	}
}

// Close ends the watch and releases its resources. It returns nil.
func (w *Watcher) Close() error {
	w.cancel()
	w.stream.close()
	return nil
}

// watchWhole is Watch on a typed server without selectors when there is a
// field mask: it watches whole pods, selects them, then applies the mask
// (with the pods' identities, as the server does).
func (c *Client) watchWhole(ctx context.Context, o callOptions, m *matcher) (*Watcher, error) {
	dec, err := newPodDecoder(o, true)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	stream, err := c.watch.CallServerStream(ctx, newRequest(o.watchRequest(), callOptions{}))
	if err != nil {
		cancel()
		return nil, wrapError(err, true)
	}
	w := &Watcher{stream: &typedEventStream{stream: stream, filter: newEventFilter(m), dec: dec}, cancel: cancel}
	ev, err := w.stream.receive()
	if err != nil {
		w.Close()
		return nil, err
	}
	w.pending = &ev
	return w, nil
}
