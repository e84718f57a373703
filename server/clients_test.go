package server_test

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

	"github.com/podsapi/podsapi/errinfo"
	corev1pb "github.com/podsapi/podsapi/gen/k8s.io/api/core/v1"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/internal/h2c"
	"github.com/podsapi/podsapi/internal/rigs/podstest"
)

// apiClient is one kind of real client of the Pods API. header carries
// request metadata; values of -bin keys are raw bytes, encoded by each client
// the way it encodes binary metadata.
type apiClient interface {
	List(ctx context.Context, header http.Header) ([]*corev1pb.Pod, error)
	Get(ctx context.Context, uid string, header http.Header) (*corev1pb.Pod, error)
	Watch(ctx context.Context, header http.Header) (watchStream, error)
}

// watchStream is an open WatchPods stream.
type watchStream interface {
	// Recv returns the next event, or the error that ended the stream.
	Recv() (*podsv1alpha1.PodWatchResponse, error)
}

// clientKinds are the clients every behaviour is checked with.
var clientKinds = []struct {
	name string
	dial func(t *testing.T, socket string) apiClient
	// dialSmallWindow dials with HTTP/2 flow-control windows of 64 KiB, so
	// that little can be in flight to a client that stops reading.
	dialSmallWindow func(t *testing.T, socket string) apiClient
}{
	{
		"connect-go",
		func(t *testing.T, socket string) apiClient {
			return connectClient{podstest.ConnectClient(t, socket)}
		},
		func(t *testing.T, socket string) apiClient {
			hc := podstest.HTTPClient(t, socket)
			hc.Transport.(*http.Transport).HTTP2 = &http.HTTP2Config{
				MaxReceiveBufferPerStream:     64 << 10,
				MaxReceiveBufferPerConnection: 64 << 10,
			}
			return connectClient{podsv1alpha1connect.NewPodsClient(hc, h2c.BaseURL, connect.WithGRPC())}
		},
	},
	{
		"grpc-go",
		func(t *testing.T, socket string) apiClient {
			return grpcClient{podstest.GRPCConn(t, socket)}
		},
		func(t *testing.T, socket string) apiClient {
			return grpcClient{podstest.GRPCConn(t, socket, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))}
		},
	},
}

// codeOf returns the gRPC code of err from either client, as a connect.Code.
func codeOf(err error) connect.Code {
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

// reasonOf returns the reason of the ErrorInfo of err from either client.
func reasonOf(err error) string {
	if r := errinfo.Reason(err); r != "" {
		return r
	}
	if st, ok := status.FromError(err); ok {
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == errinfo.Domain {
				return info.GetReason()
			}
		}
	}
	return ""
}

// messageOf returns the message of err from either client.
func messageOf(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	if st, ok := status.FromError(err); ok {
		return st.Message()
	}
	return err.Error()
}

type connectClient struct {
	c podsv1alpha1connect.PodsClient
}

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

func (c connectClient) List(ctx context.Context, h http.Header) ([]*corev1pb.Pod, error) {
	req := connect.NewRequest(&podsv1alpha1.PodListRequest{})
	connectHeader(req.Header(), h)
	resp, err := c.c.ListPods(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.Msg.GetPods(), nil
}

func (c connectClient) Get(ctx context.Context, uid string, h http.Header) (*corev1pb.Pod, error) {
	req := connect.NewRequest(&podsv1alpha1.PodGetRequest{PodUID: uid})
	connectHeader(req.Header(), h)
	resp, err := c.c.GetPod(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.Msg.GetPod(), nil
}

func (c connectClient) Watch(ctx context.Context, h http.Header) (watchStream, error) {
	req := connect.NewRequest(&podsv1alpha1.PodWatchRequest{})
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

type grpcClient struct{ conn *grpc.ClientConn }

func grpcContext(ctx context.Context, h http.Header) context.Context {
	var kv []string
	for k, vs := range h {
		for _, v := range vs {
			kv = append(kv, strings.ToLower(k), v)
		}
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

func (c grpcClient) List(ctx context.Context, h http.Header) ([]*corev1pb.Pod, error) {
	resp := &podsv1alpha1.PodListResponse{}
	if err := c.conn.Invoke(grpcContext(ctx, h), podsv1alpha1connect.PodsListPodsProcedure, &podsv1alpha1.PodListRequest{}, resp); err != nil {
		return nil, err
	}
	return resp.GetPods(), nil
}

func (c grpcClient) Get(ctx context.Context, uid string, h http.Header) (*corev1pb.Pod, error) {
	resp := &podsv1alpha1.PodGetResponse{}
	if err := c.conn.Invoke(grpcContext(ctx, h), podsv1alpha1connect.PodsGetPodProcedure, &podsv1alpha1.PodGetRequest{PodUID: uid}, resp); err != nil {
		return nil, err
	}
	return resp.GetPod(), nil
}

func (c grpcClient) Watch(ctx context.Context, h http.Header) (watchStream, error) {
	desc := &grpc.StreamDesc{StreamName: "WatchPods", ServerStreams: true}
	stream, err := c.conn.NewStream(grpcContext(ctx, h), desc, podsv1alpha1connect.PodsWatchPodsProcedure)
	if err != nil {
		return nil, err
	}
	if err := stream.SendMsg(&podsv1alpha1.PodWatchRequest{}); err != nil {
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
