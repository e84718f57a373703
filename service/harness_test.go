package service_test

import (
	"context"
	"net"
	"net/http"
	"slices"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1/v1alpha1connect"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/service"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// harness serves both wires of a store's handlers over an in-memory
// listener (bufconn): HTTP/2 without a socket, and without the server's
// guards. With streams, its watches have a Stream (service.WithStreams), as
// the server's transport gives them: the events ready together are flushed
// once, and shared snapshots are written raw.
type harness struct {
	store *store.Store
	lis   *bufconn.Listener
	// http is an h2c client of the harness.
	http *http.Client
	// events counts the requests served to their end.
	events *podstest.Events
}

// baseURL is the URL of the harness's server for its clients.
const baseURL = "http://harness"

// newHarness serves st with opts, and with a Stream per watch if streams.
func newHarness(t testing.TB, st *store.Store, streams bool, opts ...service.Option) *harness {
	t.Helper()
	return newHarnessOf(t, st, st, streams, opts...)
}

// newHarnessOf is newHarness of handlers that read r, a view of st.
func newHarnessOf(t testing.TB, st *store.Store, r service.PodReader, streams bool, opts ...service.Option) *harness {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	if streams {
		opts = append(opts, service.WithStreams(streamOf))
	}
	h := service.NewHandlers(r, opts...)
	hopts := service.HandlerOptions(service.FieldMasks())
	mux := http.NewServeMux()
	mux.Handle(podsv1alpha1connect.NewPodsHandler(h.Pods, hopts...))
	mux.Handle(v1alpha1connect.NewPodsHandler(h.Kubelet, hopts...))
	var handler http.Handler = mux
	if streams {
		handler = withStreams(mux)
	}
	events := podstest.NewEvents()
	handler = served(handler, events)
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: handler, Protocols: protocols}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	h2 := &harness{store: st, lis: lis, events: events}
	h2.http = h2.client(t, nil)
	return h2
}

// client returns a new h2c client of the harness, on connections of its
// own, with the HTTP/2 settings of cfg (nil: net/http's).
func (h *harness) client(t testing.TB, cfg *http.HTTP2Config) *http.Client {
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	tr := &http.Transport{
		Protocols:   protocols,
		HTTP2:       cfg,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return h.lis.DialContext(ctx) },
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// served counts in events every request next has served to its end.
func served(next http.Handler, events *podstest.Events) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer events.Served(r)
		next.ServeHTTP(w, r)
	})
}

// revision returns the store's current revision.
func (h *harness) revision() string {
	v, _ := h.store.List()
	return h.store.Revision(v)
}

// synced returns a synced store of pods.
func synced(opts []store.Option, pods ...*corev1.Pod) *store.Store {
	st := store.New(opts...)
	for _, p := range pods {
		st.Upsert(p)
	}
	st.MarkSynced()
	return st
}

// testStream is the Stream of a watch of the harness: the least a
// transport does for it (the server's is server/internal/transport.Stream,
// which also writes in pieces of net/http's buffer).
type testStream struct {
	http.ResponseWriter
	rc      *http.ResponseController
	held    bool
	pending bool
}

func (s *testStream) Flush() {
	if s.held {
		s.pending = true
		return
	}
	_ = s.rc.Flush()
}

func (s *testStream) Unwrap() http.ResponseWriter { return s.ResponseWriter }
func (s *testStream) Hold()                       { s.held = true }

func (s *testStream) Release() {
	s.held = false
	if s.pending {
		s.pending = false
		s.Flush()
	}
}

func (s *testStream) WriteRaw(b []byte) error {
	_, err := s.ResponseWriter.Write(b)
	return err
}

type streamKey struct{}

// watchProcedures are the procedures whose responses get a Stream.
var watchProcedures = []string{podsv1alpha1connect.PodsWatchPodsProcedure, v1alpha1connect.PodsWatchPodsProcedure}

// withStreams gives every watch of next its Stream.
func withStreams(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(watchProcedures, r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		s := &testStream{ResponseWriter: w, rc: http.NewResponseController(w)}
		next.ServeHTTP(s, r.WithContext(context.WithValue(r.Context(), streamKey{}, s)))
	})
}

// streamOf is the harness's service.WithStreams.
func streamOf(ctx context.Context) service.Stream {
	if s, ok := ctx.Value(streamKey{}).(*testStream); ok {
		return s
	}
	return nil
}

// client is a client of the typed wire, whichever library and protocol.
type client interface {
	List(ctx context.Context, req *podsv1alpha1.PodListRequest) (*podsv1alpha1.PodListResponse, error)
	Watch(ctx context.Context, req *podsv1alpha1.PodWatchRequest) (recv func() (*podsv1alpha1.PodWatchResponse, error), err error)
}

// clientKinds are the clients every watch test runs with: connect-go in
// each of its protocols, and grpc-go.
var clientKinds = []struct {
	name string
	dial func(t testing.TB, h *harness) client
}{
	{"connect-go grpc", func(t testing.TB, h *harness) client { return connectClient(h, connect.WithGRPC()) }},
	{"connect-go grpc-web", func(t testing.TB, h *harness) client { return connectClient(h, connect.WithGRPCWeb()) }},
	{"connect-go connect", func(t testing.TB, h *harness) client { return connectClient(h) }},
	{"grpc-go", dialGRPC},
}

type connectPods struct {
	c podsv1alpha1connect.PodsClient
}

func connectClient(h *harness, opts ...connect.ClientOption) client {
	return connectPods{podsv1alpha1connect.NewPodsClient(h.http, baseURL, opts...)}
}

func (c connectPods) List(ctx context.Context, req *podsv1alpha1.PodListRequest) (*podsv1alpha1.PodListResponse, error) {
	resp, err := c.c.ListPods(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

func (c connectPods) Watch(ctx context.Context, req *podsv1alpha1.PodWatchRequest) (func() (*podsv1alpha1.PodWatchResponse, error), error) {
	s, err := c.c.WatchPods(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	return func() (*podsv1alpha1.PodWatchResponse, error) {
		if s.Receive() {
			return s.Msg(), nil
		}
		if err := s.Err(); err != nil {
			return nil, err
		}
		return nil, context.Canceled
	}, nil
}

type grpcPods struct{ conn *grpc.ClientConn }

func dialGRPC(t testing.TB, h *harness) client {
	conn, err := grpc.NewClient("passthrough:///harness",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return h.lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return grpcPods{conn}
}

func (c grpcPods) List(ctx context.Context, req *podsv1alpha1.PodListRequest) (*podsv1alpha1.PodListResponse, error) {
	resp := &podsv1alpha1.PodListResponse{}
	if err := c.conn.Invoke(ctx, podsv1alpha1connect.PodsListPodsProcedure, req, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

func (c grpcPods) Watch(ctx context.Context, req *podsv1alpha1.PodWatchRequest) (func() (*podsv1alpha1.PodWatchResponse, error), error) {
	desc := &grpc.StreamDesc{StreamName: "WatchPods", ServerStreams: true}
	s, err := c.conn.NewStream(ctx, desc, podsv1alpha1connect.PodsWatchPodsProcedure)
	if err != nil {
		return nil, err
	}
	if err := s.SendMsg(req); err != nil {
		return nil, err
	}
	if err := s.CloseSend(); err != nil {
		return nil, err
	}
	return func() (*podsv1alpha1.PodWatchResponse, error) {
		ev := &podsv1alpha1.PodWatchResponse{}
		if err := s.RecvMsg(ev); err != nil {
			return nil, err
		}
		return ev, nil
	}, nil
}

// next returns the next event of recv, failing the test on an error.
func next(t testing.TB, recv func() (*podsv1alpha1.PodWatchResponse, error)) *podsv1alpha1.PodWatchResponse {
	t.Helper()
	ev, err := recv()
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	return ev
}

// expectEvent checks the type and pod of an event.
func expectEvent(t testing.TB, ev *podsv1alpha1.PodWatchResponse, typ podsv1alpha1.EventType, want *corev1.Pod) {
	t.Helper()
	if ev.GetType() != typ {
		t.Fatalf("event type = %v, want %v (pod %s)", ev.GetType(), typ, ev.GetPod().GetMetadata().GetName())
	}
	if !proto.Equal(ev.GetPod(), podstest.Message(t, want)) {
		t.Fatalf("%v event pod = %v\nwant %v", typ, ev.GetPod(), want)
	}
}
