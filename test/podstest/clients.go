package podstest

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/podsapi/podsapi/errinfo"
	corev1pb "github.com/podsapi/podsapi/gen/k8s.io/api/core/v1"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/internal/h2c"
)

// APIClient is one kind of real client of the Pods API (ClientKinds).
// header carries request metadata; values of -bin keys are raw bytes,
// encoded by each client the way it encodes binary metadata.
type APIClient interface {
	List(ctx context.Context, header http.Header) ([]*corev1pb.Pod, error)
	Get(ctx context.Context, uid string, header http.Header) (*corev1pb.Pod, error)
	Watch(ctx context.Context, header http.Header) (WatchStream, error)
	// ListReq and WatchReq send a whole request message.
	ListReq(ctx context.Context, req *podsv1alpha1.PodListRequest, header http.Header) (*podsv1alpha1.PodListResponse, error)
	WatchReq(ctx context.Context, req *podsv1alpha1.PodWatchRequest, header http.Header) (WatchStream, error)
}

// WatchStream is an open WatchPods stream.
type WatchStream interface {
	// Recv returns the next event, or the error that ended the stream.
	Recv() (*podsv1alpha1.PodWatchResponse, error)
}

// ClientKind is a kind of client that tests check every behaviour with.
type ClientKind struct {
	Name string
	// Dial returns a client of socket.
	Dial func(t *testing.T, socket string) APIClient
	// DialSmallWindow dials with HTTP/2 flow-control windows of 64 KiB, so
	// that little can be in flight to a client that stops reading.
	DialSmallWindow func(t *testing.T, socket string) APIClient
}

// ClientKinds are connect-go (gRPC protocol) and grpc-go.
var ClientKinds = []ClientKind{
	{
		"connect-go",
		func(t *testing.T, socket string) APIClient {
			return connectAPI{ConnectClient(t, socket)}
		},
		func(t *testing.T, socket string) APIClient {
			hc := HTTPClient(t, socket)
			hc.Transport.(*http.Transport).HTTP2 = &http.HTTP2Config{
				MaxReceiveBufferPerStream:     64 << 10,
				MaxReceiveBufferPerConnection: 64 << 10,
			}
			return connectAPI{podsv1alpha1connect.NewPodsClient(hc, h2c.BaseURL, connect.WithGRPC())}
		},
	},
	{
		"grpc-go",
		func(t *testing.T, socket string) APIClient {
			return grpcAPI{GRPCConn(t, socket)}
		},
		func(t *testing.T, socket string) APIClient {
			return grpcAPI{GRPCConn(t, socket, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))}
		},
	},
}

// ErrorCode returns the gRPC code of err from either client, as a connect.Code.
func ErrorCode(err error) connect.Code {
	if err == nil {
		return 0
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Code()
	}
	if st, ok := status.FromError(err); ok {
		return connect.Code(st.Code())
	}
	return connect.CodeUnknown
}

// errorInfo returns the ErrorInfo of podsapi's domain of err from either
// client, or nil.
func errorInfo(err error) *errdetails.ErrorInfo {
	if info := errinfo.Of(err); info != nil {
		return info
	}
	if st, ok := status.FromError(err); ok {
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == errinfo.Domain {
				return info
			}
		}
	}
	return nil
}

// ErrorReason returns the reason of the ErrorInfo of err from either client.
func ErrorReason(err error) string { return errorInfo(err).GetReason() }

// ErrorMetadata returns the metadata of the ErrorInfo of err from either
// client.
func ErrorMetadata(err error) map[string]string { return errorInfo(err).GetMetadata() }

// ErrorMessage returns the message of err from either client.
func ErrorMessage(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	if st, ok := status.FromError(err); ok {
		return st.Message()
	}
	return err.Error()
}

// Recv returns the next event of s, failing the test on an error.
func Recv(t testing.TB, s WatchStream) *podsv1alpha1.PodWatchResponse {
	t.Helper()
	ev, err := s.Recv()
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	return ev
}

// ExpectEvent checks the type and pod of an event.
func ExpectEvent(t testing.TB, ev *podsv1alpha1.PodWatchResponse, typ podsv1alpha1.EventType, want *corev1pb.Pod) {
	t.Helper()
	if ev.GetType() != typ {
		t.Fatalf("event type = %v, want %v (pod %s)", ev.GetType(), typ, ev.GetPod().GetMetadata().GetName())
	}
	if !proto.Equal(ev.GetPod(), want) {
		t.Fatalf("%v event pod = %v\nwant %v", typ, ev.GetPod(), want)
	}
}

// MaskHeader returns request metadata with the text field mask paths.
func MaskHeader(paths ...string) http.Header {
	h := http.Header{}
	for _, p := range paths {
		h.Add("x-kubernetes-fieldmask", p)
	}
	return h
}

type connectAPI struct {
	c podsv1alpha1connect.PodsClient
}

// connectHeader adds src to dst, encoding the values of -bin keys.
func connectHeader(dst, src http.Header) {
	for k, vs := range src {
		for _, v := range vs {
			if strings.HasSuffix(strings.ToLower(k), "-bin") {
				v = connect.EncodeBinaryHeader([]byte(v))
			}
			dst.Add(k, v)
		}
	}
}

func (c connectAPI) List(ctx context.Context, h http.Header) ([]*corev1pb.Pod, error) {
	resp, err := c.ListReq(ctx, &podsv1alpha1.PodListRequest{}, h)
	return resp.GetPods(), err
}

func (c connectAPI) Get(ctx context.Context, uid string, h http.Header) (*corev1pb.Pod, error) {
	req := connect.NewRequest(&podsv1alpha1.PodGetRequest{PodUID: uid})
	connectHeader(req.Header(), h)
	resp, err := c.c.GetPod(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.Msg.GetPod(), nil
}

func (c connectAPI) Watch(ctx context.Context, h http.Header) (WatchStream, error) {
	return c.WatchReq(ctx, &podsv1alpha1.PodWatchRequest{}, h)
}

func (c connectAPI) ListReq(ctx context.Context, msg *podsv1alpha1.PodListRequest, h http.Header) (*podsv1alpha1.PodListResponse, error) {
	req := connect.NewRequest(msg)
	connectHeader(req.Header(), h)
	resp, err := c.c.ListPods(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

func (c connectAPI) WatchReq(ctx context.Context, msg *podsv1alpha1.PodWatchRequest, h http.Header) (WatchStream, error) {
	req := connect.NewRequest(msg)
	connectHeader(req.Header(), h)
	stream, err := c.c.WatchPods(ctx, req)
	if err != nil {
		return nil, err
	}
	return connectStream{stream}, nil
}

type connectStream struct {
	s *connect.ServerStreamForClient[podsv1alpha1.PodWatchResponse]
}

func (s connectStream) Recv() (*podsv1alpha1.PodWatchResponse, error) {
	if s.s.Receive() {
		return s.s.Msg(), nil
	}
	if err := s.s.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("stream ended without an error")
}

type grpcAPI struct{ conn *grpc.ClientConn }

// grpcContext returns ctx with h as outgoing metadata.
func grpcContext(ctx context.Context, h http.Header) context.Context {
	var kv []string
	for k, vs := range h {
		for _, v := range vs {
			kv = append(kv, strings.ToLower(k), v)
		}
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

func (c grpcAPI) List(ctx context.Context, h http.Header) ([]*corev1pb.Pod, error) {
	resp, err := c.ListReq(ctx, &podsv1alpha1.PodListRequest{}, h)
	return resp.GetPods(), err
}

func (c grpcAPI) Get(ctx context.Context, uid string, h http.Header) (*corev1pb.Pod, error) {
	resp := &podsv1alpha1.PodGetResponse{}
	if err := c.conn.Invoke(grpcContext(ctx, h), podsv1alpha1connect.PodsGetPodProcedure, &podsv1alpha1.PodGetRequest{PodUID: uid}, resp); err != nil {
		return nil, err
	}
	return resp.GetPod(), nil
}

func (c grpcAPI) Watch(ctx context.Context, h http.Header) (WatchStream, error) {
	return c.WatchReq(ctx, &podsv1alpha1.PodWatchRequest{}, h)
}

func (c grpcAPI) ListReq(ctx context.Context, msg *podsv1alpha1.PodListRequest, h http.Header) (*podsv1alpha1.PodListResponse, error) {
	resp := &podsv1alpha1.PodListResponse{}
	if err := c.conn.Invoke(grpcContext(ctx, h), podsv1alpha1connect.PodsListPodsProcedure, msg, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

func (c grpcAPI) WatchReq(ctx context.Context, msg *podsv1alpha1.PodWatchRequest, h http.Header) (WatchStream, error) {
	desc := &grpc.StreamDesc{StreamName: "WatchPods", ServerStreams: true}
	stream, err := c.conn.NewStream(grpcContext(ctx, h), desc, podsv1alpha1connect.PodsWatchPodsProcedure)
	if err != nil {
		return nil, err
	}
	if err := stream.SendMsg(msg); err != nil {
		return nil, err
	}
	if err := stream.CloseSend(); err != nil {
		return nil, err
	}
	return grpcStream{stream}, nil
}

type grpcStream struct{ s grpc.ClientStream }

func (s grpcStream) Recv() (*podsv1alpha1.PodWatchResponse, error) {
	m := &podsv1alpha1.PodWatchResponse{}
	if err := s.s.RecvMsg(m); err != nil {
		return nil, err
	}
	return m, nil
}
