package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"connectrpc.com/connect"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeletpods "k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	"github.com/podsapi/podsapi/errinfo"
)

// The calls of the kubelet's wire, v1alpha1.Pods. They send the field mask
// header too (podsapi honours it on this wire; a kubelet ignores it), and
// apply the mask themselves to what they receive.

// listKubelet is List on the kubelet's wire. A kubelet lists its pods in no
// particular order: they are sorted here, as podsapi sorts them, by their
// identity, which the mask sent therefore includes (podsapi applies it on
// this wire too).
//
// A kubelet has no selectors: with m, the client asks for whole pods,
// selects them, then applies the mask itself.
func (c *Client) listKubelet(ctx context.Context, o callOptions, m *matcher) ([]*corev1.Pod, error) {
	dec, err := newPodDecoder(o, false)
	if err != nil {
		return nil, err
	}
	if m != nil {
		o = callOptions{}
	} else if dec.mask != nil {
		withIdentity, err := dec.mask.Union(identityPaths...)
		if err != nil {
			return nil, errFieldMask(err)
		}
		o = callOptions{fields: withIdentity.Paths()}
	}
	res, err := c.rawList.CallUnary(ctx, newRequest(&kubeletpods.ListPodsRequest{}, o))
	if err != nil {
		return nil, wrapError(err, false)
	}
	// Sorted by the whole pods' identities, which a mask may leave out.
	type entry struct {
		id  podIdentity
		raw []byte
	}
	entries := make([]entry, len(res.Msg.GetPods()))
	for i, raw := range res.Msg.GetPods() {
		id, err := identityOf(raw)
		if err != nil {
			return nil, err
		}
		entries[i] = entry{id, raw}
	}
	slices.SortStableFunc(entries, func(a, b entry) int { return a.id.compare(b.id) })
	pods := make([]*corev1.Pod, 0, len(entries))
	for _, e := range entries {
		if m != nil {
			whole, err := decodePod(e.raw)
			if err != nil {
				return nil, errDecode(err)
			}
			if !m.matches(whole) {
				continue
			}
		}
		pod, err := dec.decode(e.raw)
		if err != nil {
			return nil, err
		}
		pods = append(pods, pod)
	}
	return pods, nil
}

// getKubelet is Get on the kubelet's wire.
func (c *Client) getKubelet(ctx context.Context, uid types.UID, o callOptions) (*corev1.Pod, error) {
	dec, err := newPodDecoder(o, false)
	if err != nil {
		return nil, err
	}
	res, err := c.rawGet.CallUnary(ctx, newRequest(&kubeletpods.GetPodRequest{PodUID: string(uid)}, o))
	if err != nil {
		return nil, wrapError(err, false)
	}
	return dec.decode(res.Msg.GetPod())
}

// watchKubelet opens the stream of Watch on the kubelet's wire.
// With m, it asks for whole pods, selects them, then applies the mask.
func (c *Client) watchKubelet(ctx context.Context, o callOptions, m *matcher) (eventStream, error) {
	if o.resumeFrom != "" {
		return nil, &apiError{sentinel: ErrRevisionTooOld, err: connect.NewError(connect.CodeOutOfRange,
			errors.New("the kubelet's wire has no revisions to resume from: watch again without one"))}
	}
	dec, err := newPodDecoder(o, true)
	if err != nil {
		return nil, err
	}
	if m != nil {
		o = callOptions{}
	}
	stream, err := c.rawWatch.CallServerStream(ctx, newRequest(&kubeletpods.WatchPodsRequest{}, o))
	if err != nil {
		return nil, wrapError(err, true)
	}
	s := &rawEventStream{stream: stream, dec: dec, socket: c.socket, ctx: ctx}
	if m != nil {
		s.filter = newEventFilter(m)
	}
	if dec.mask != nil {
		s.views = make(map[string][]byte)
	}
	return s, nil
}

// rawEventStream is the stream of a watch on the kubelet's wire.
type rawEventStream struct {
	stream *connect.ServerStreamForClient[kubeletpods.WatchPodsEvent]
	dec    *podDecoder
	// views holds the masked encoding of every pod by UID, when there is a
	// mask: a Modified event that leaves it unchanged is skipped, as podsapi
	// skips it.
	views map[string][]byte
	// filter applies the selectors to whole pods; nil without selectors.
	filter *eventFilter
	// socket is the server's, probed when the stream ends as a kubelet
	// ends it both on shutdown and for a slow watcher.
	socket string
	// ctx is the watch's: once it is done, the stream ended for the client's
	// own reason.
	ctx context.Context
}

func (s *rawEventStream) receive() (Event, error) {
	for {
		if !s.stream.Receive() {
			return Event{}, s.endError(streamError(s.stream.Err()))
		}
		msg := s.stream.Msg()
		typ, err := eventType(uint64(msg.GetType()))
		if err != nil {
			return Event{}, err
		}
		if typ == Synced {
			return Event{Type: Synced}, nil
		}
		if len(msg.GetPod()) == 0 {
			return Event{}, fmt.Errorf("client: watch event of type %d without a pod", msg.GetType())
		}
		if s.filter != nil {
			whole, err := decodePod(msg.GetPod())
			if err != nil {
				return Event{}, errDecode(err)
			}
			ev, ok := s.filter.apply(Event{Type: typ, Pod: whole})
			if !ok {
				continue
			}
			typ = ev.Type
		}
		view, err := s.dec.project(msg.GetPod())
		if err != nil {
			return Event{}, err
		}
		if s.views != nil {
			if skip, err := s.unchanged(typ, view); skip || err != nil {
				if err != nil {
					return Event{}, err
				}
				continue
			}
		}
		pod, err := decodePod(view)
		if err != nil {
			return Event{}, errDecode(err)
		}
		return Event{Type: typ, Pod: pod}, nil
	}
}

// unchanged records the masked view of an event's pod, and reports whether
// the event is a Modified event that leaves the view unchanged.
func (s *rawEventStream) unchanged(typ EventType, view []byte) (bool, error) {
	id, err := identityOf(view)
	if err != nil {
		return false, err
	}
	if typ == Deleted {
		delete(s.views, string(id.uid))
		return false, nil
	}
	prev := s.views[string(id.uid)]
	if typ == Modified && bytes.Equal(prev, view) {
		return true, nil
	}
	s.views[string(id.uid)] = append(prev[:0], view...)
	return false, nil
}

func (s *rawEventStream) close() { s.stream.Close() }

// endError returns err, the error that ended the stream, wrapping
// ErrServerGone instead of ErrFellBehind when the server is going away: a
// kubelet ends its watches with the same RESOURCE_EXHAUSTED "watch client
// channel closed", without an ErrorInfo, when it shuts down as when it
// drops a slow watcher (k8s.io/kubernetes pkg/kubelet/apis/pods/server.go).
// The socket tells them apart: a kubelet that is stopping no longer
// accepts connections (grpc-go's GracefulStop closes its listener first).
//
// A kubelet may also exit before it ends its watches: the stream then
// breaks (an unexpected EOF), and the same probe tells that the server
// went away.
func (s *rawEventStream) endError(err error) error {
	var ae *apiError
	if errors.As(err, &ae) {
		if ae.sentinel != ErrFellBehind || errinfo.Of(ae.err) != nil || !serverGone(s.socket) {
			return err
		}
		return &apiError{sentinel: ErrServerGone, err: ae.err}
	}
	var ce *connect.Error
	if !errors.As(err, &ce) || connect.IsWireError(ce) {
		return err
	}
	switch ce.Code() {
	case connect.CodeInternal, connect.CodeUnavailable, connect.CodeUnknown, connect.CodeCanceled:
		// A broken stream (connect-go reports a reset connection as
		// CANCELED), not the client's own deadline or cancellation.
		if s.ctx.Err() == nil && serverGone(s.socket) {
			return &apiError{sentinel: ErrServerGone, err: ce}
		}
	}
	return err
}

// serverGone reports whether the server on socket no longer answers a new
// connection with its HTTP/2 settings within probeTimeout.
func serverGone(socket string) bool {
	conn, err := net.DialTimeout("unix", socket, probeTimeout)
	if err != nil {
		return true
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(probeTimeout))
	// The client preface and an empty SETTINGS frame; a server answers
	// with its own SETTINGS frame (type 4).
	if _, err := conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")); err != nil {
		return true
	}
	var head [9]byte
	if _, err := io.ReadFull(conn, head[:]); err != nil {
		return true
	}
	return head[3] != 0x4
}

// probeTimeout bounds the probe of serverGone.
const probeTimeout = time.Second

// streamError returns the error that ended a watch stream: err, io.EOF
// when the stream ended without one.
func streamError(err error) error {
	if err == nil {
		err = io.EOF
	}
	return wrapError(err, true)
}
