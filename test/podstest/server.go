package podstest

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/internal/h2c"
	"github.com/podsapi/podsapi/server"
)

// MaxMessageBytes is the receive limit of the clients of this package: large
// enough for a ListPods of thousands of whole pods.
const MaxMessageBytes = 256 << 20

// SocketPath returns a fresh socket path in a new temporary directory, short
// enough for the 108-byte limit of UNIX socket paths, removed at the end of
// the test.
func SocketPath(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "podsapi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "pods.sock")
}

// Start starts a server for st with cfg, on a fresh socket unless cfg names
// one, and stops it at the end of the test. The metrics endpoint is off
// unless cfg names an address.
func Start(t testing.TB, st server.Pods, cfg server.Config) *server.Server {
	t.Helper()
	srv, _ := start(t, st, cfg)
	return srv
}

// start is Start, and also returns what stops the server: it cancels Serve
// and waits for it to return, failing the test if it returns an error or
// does not return within 30 s. It runs at the end of the test if not
// before.
func start(t testing.TB, st server.Pods, cfg server.Config) (*server.Server, func()) {
	t.Helper()
	if cfg.Socket == "" {
		cfg.Socket = SocketPath(t)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	srv, err := server.New(st, cfg)
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("serve: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("server did not stop within 30s")
			}
		})
	}
	t.Cleanup(stop)
	return srv, stop
}

// HTTPClient returns an h2c HTTP client for socket, closed at the end of the
// test.
func HTTPClient(t testing.TB, socket string) *http.Client {
	t.Helper()
	c := h2c.NewClient(socket)
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// ConnectClient returns a connect-go client of the Pods API speaking gRPC on
// socket.
func ConnectClient(t testing.TB, socket string, opts ...connect.ClientOption) podsv1alpha1connect.PodsClient {
	t.Helper()
	opts = append([]connect.ClientOption{connect.WithGRPC(), connect.WithReadMaxBytes(MaxMessageBytes)}, opts...)
	return podsv1alpha1connect.NewPodsClient(HTTPClient(t, socket), h2c.BaseURL, opts...)
}

// GRPCConn returns a grpc-go client connection to socket, with more options
// if given, closed at the end of the test.
func GRPCConn(t testing.TB, socket string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes)),
	}, opts...)
	conn, err := grpc.NewClient("unix://"+socket, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
