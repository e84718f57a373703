package conformance

import (
	"context"
	"fmt"
	"net/http"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	corev1pb "github.com/podsapi/podsapi/gen/k8s.io/api/core/v1"
	"github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1/v1alpha1connect"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/internal/h2c"
)

// Wire is the service the suite speaks to the implementation.
type Wire string

// The wires the suite judges.
const (
	// WirePodsAPI is the typed service kubelet.pods.v1alpha1.Pods: pods as
	// k8s.io.api.core.v1.Pod messages. The default.
	WirePodsAPI Wire = "podsapi"
	// WireKubelet is the kubelet's own service v1alpha1.Pods
	// (k8s.io/kubelet/pkg/apis/pods/v1alpha1): pods as the bytes of their
	// Kubernetes protobuf encoding.
	WireKubelet Wire = "kubelet"
)

// Wires lists every wire, in the order CASES.md shows them.
var Wires = []Wire{WirePodsAPI, WireKubelet}

// ParseWire returns the wire named s.
func ParseWire(s string) (Wire, error) {
	for _, w := range Wires {
		if string(w) == s {
			return w, nil
		}
	}
	return "", fmt.Errorf("unknown wire %q: want %q or %q", s, WirePodsAPI, WireKubelet)
}

// Service is the full name of the gRPC service of the wire.
func (w Wire) Service() string {
	if w == WireKubelet {
		return v1alpha1connect.PodsName
	}
	return podsv1alpha1connect.PodsName
}

// watchProcedure is the path of WatchPods on the wire.
func (w Wire) watchProcedure() string {
	if w == WireKubelet {
		return v1alpha1connect.PodsWatchPodsProcedure
	}
	return podsv1alpha1connect.PodsWatchPodsProcedure
}

// podsClient is the Pods API as the cases use it, whatever the wire: pods
// decoded into the typed Pod (the kubelet wire's bytes are its encoding),
// event types as the typed enum (both wires number them alike).
type podsClient interface {
	list(ctx context.Context, h http.Header) ([]*corev1pb.Pod, error)
	get(ctx context.Context, uid string, h http.Header) (*corev1pb.Pod, error)
	// watch opens a stream; it returns with the response headers.
	watch(ctx context.Context, h http.Header) (podStream, error)
}

// podStream is an open WatchPods stream.
type podStream interface {
	// receive returns the next event, or false at the end of the stream
	// (err then tells why).
	receive() (podsv1alpha1.EventType, *corev1pb.Pod, bool)
	err() error
	close()
}

// newPodsClient returns the client of wire over hc.
func newPodsClient(wire Wire, hc *http.Client) podsClient {
	opts := []connect.ClientOption{connect.WithGRPC(), connect.WithReadMaxBytes(maxMessageBytes)}
	if wire == WireKubelet {
		return kubeletClient{v1alpha1connect.NewPodsClient(hc, h2c.BaseURL, opts...)}
	}
	return typedClient{podsv1alpha1connect.NewPodsClient(hc, h2c.BaseURL, opts...)}
}

// typedClient speaks kubelet.pods.v1alpha1.Pods.
type typedClient struct {
	c podsv1alpha1connect.PodsClient
}

func (t typedClient) list(ctx context.Context, h http.Header) ([]*corev1pb.Pod, error) {
	resp, err := t.c.ListPods(ctx, withHeader(&podsv1alpha1.PodListRequest{}, h))
	if err != nil {
		return nil, err
	}
	return resp.Msg.GetPods(), nil
}

func (t typedClient) get(ctx context.Context, uid string, h http.Header) (*corev1pb.Pod, error) {
	resp, err := t.c.GetPod(ctx, withHeader(&podsv1alpha1.PodGetRequest{PodUID: uid}, h))
	if err != nil {
		return nil, err
	}
	return resp.Msg.GetPod(), nil
}

func (t typedClient) watch(ctx context.Context, h http.Header) (podStream, error) {
	s, err := t.c.WatchPods(ctx, withHeader(&podsv1alpha1.PodWatchRequest{}, h))
	if err != nil {
		return nil, err
	}
	return typedStream{s}, nil
}

type typedStream struct {
	s *connect.ServerStreamForClient[podsv1alpha1.PodWatchResponse]
}

func (s typedStream) receive() (podsv1alpha1.EventType, *corev1pb.Pod, bool) {
	if !s.s.Receive() {
		return 0, nil, false
	}
	return s.s.Msg().GetType(), s.s.Msg().GetPod(), true
}

func (s typedStream) err() error { return s.s.Err() }
func (s typedStream) close()     { s.s.Close() }

// kubeletClient speaks the kubelet's v1alpha1.Pods.
type kubeletClient struct{ c v1alpha1connect.PodsClient }

// decodePod decodes the bytes of a pod of the kubelet wire.
func decodePod(raw []byte) (*corev1pb.Pod, error) {
	pod := new(corev1pb.Pod)
	if err := proto.Unmarshal(raw, pod); err != nil {
		return nil, fmt.Errorf("the pod bytes (%d) are not a protobuf v1.Pod: %w", len(raw), err)
	}
	return pod, nil
}

func (k kubeletClient) list(ctx context.Context, h http.Header) ([]*corev1pb.Pod, error) {
	resp, err := k.c.ListPods(ctx, withHeader(&v1alpha1.ListPodsRequest{}, h))
	if err != nil {
		return nil, err
	}
	pods := make([]*corev1pb.Pod, 0, len(resp.Msg.GetPods()))
	for _, raw := range resp.Msg.GetPods() {
		p, err := decodePod(raw)
		if err != nil {
			return nil, err
		}
		pods = append(pods, p)
	}
	return pods, nil
}

func (k kubeletClient) get(ctx context.Context, uid string, h http.Header) (*corev1pb.Pod, error) {
	resp, err := k.c.GetPod(ctx, withHeader(&v1alpha1.GetPodRequest{PodUID: uid}, h))
	if err != nil {
		return nil, err
	}
	return decodePod(resp.Msg.GetPod())
}

func (k kubeletClient) watch(ctx context.Context, h http.Header) (podStream, error) {
	s, err := k.c.WatchPods(ctx, withHeader(&v1alpha1.WatchPodsRequest{}, h))
	if err != nil {
		return nil, err
	}
	return &kubeletStream{s: s}, nil
}

type kubeletStream struct {
	s      *connect.ServerStreamForClient[v1alpha1.WatchPodsEvent]
	decode error
}

func (s *kubeletStream) receive() (podsv1alpha1.EventType, *corev1pb.Pod, bool) {
	if s.decode != nil || !s.s.Receive() {
		return 0, nil, false
	}
	return kubeletEvent(s.s.Msg(), &s.decode)
}

// kubeletEvent maps an event of the kubelet wire to the typed one: the same
// numbers, and an empty pod (INITIAL_SYNC_COMPLETE) is no pod. A pod that
// does not decode is stored in *decodeErr and ends the stream.
func kubeletEvent(ev *v1alpha1.WatchPodsEvent, decodeErr *error) (podsv1alpha1.EventType, *corev1pb.Pod, bool) {
	typ := podsv1alpha1.EventType(ev.GetType())
	if len(ev.GetPod()) == 0 {
		return typ, nil, true
	}
	pod, err := decodePod(ev.GetPod())
	if err != nil {
		*decodeErr = fmt.Errorf("%s event: %w", ev.GetType(), err)
		return 0, nil, false
	}
	return typ, pod, true
}

func (s *kubeletStream) err() error {
	if s.decode != nil {
		return s.decode
	}
	return s.s.Err()
}

func (s *kubeletStream) close() { s.s.Close() }

// wireMessages returns, for the raw gRPC stream of the slow consumer case,
// a fresh request and a decoder of the responses of the wire.
func (w Wire) rawWatch() (req proto.Message, newResp func() proto.Message, decode func(proto.Message) (podsv1alpha1.EventType, *corev1pb.Pod, error)) {
	if w == WireKubelet {
		return &v1alpha1.WatchPodsRequest{}, func() proto.Message { return new(v1alpha1.WatchPodsEvent) },
			func(m proto.Message) (podsv1alpha1.EventType, *corev1pb.Pod, error) {
				var err error
				typ, pod, ok := kubeletEvent(m.(*v1alpha1.WatchPodsEvent), &err)
				if !ok {
					return 0, nil, err
				}
				return typ, pod, nil
			}
	}
	return &podsv1alpha1.PodWatchRequest{}, func() proto.Message { return new(podsv1alpha1.PodWatchResponse) },
		func(m proto.Message) (podsv1alpha1.EventType, *corev1pb.Pod, error) {
			r := m.(*podsv1alpha1.PodWatchResponse)
			return r.GetType(), r.GetPod(), nil
		}
}

// revisioned is a stream whose events carry a revision (the typed wire).
type revisioned interface {
	// revision is the revision of the event receive returned last.
	revision() string
}

func (s typedStream) revision() string { return s.s.Msg().GetRevision() }
