package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/podsapi/podsapi/server"
	staticpods "github.com/podsapi/podsapi/source/manifest"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// node is a server, as podsapi-server assembles it, serving a manifest
// directory in this process.
type node struct {
	Socket    string
	Manifests string
}

// startServer serves a fresh manifest directory holding the given files on
// a fresh socket with cfg, in this process, and waits until its health
// service says SERVING (the source has synced). The server and its source are
// stopped at the end of the test, and must return no error.
func startServer(t *testing.T, files map[string]string, cfg server.Config) *node {
	t.Helper()
	socket := podstest.SocketPath(t)
	n := &node{Socket: socket, Manifests: filepath.Join(filepath.Dir(socket), "manifests")}
	if err := os.Mkdir(n.Manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		n.write(t, name, content)
	}
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	st := store.New()
	cfg.Socket, cfg.Logger = n.Socket, logger
	podstest.Start(t, st, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- staticpods.New(n.Manifests, "node-1", staticpods.WithLogger(logger)).Run(ctx, st) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("manifest source: %v", err)
		}
	})
	wait, cancelWait := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancelWait()
	// The health service's Watch streams NOT_SERVING until the source has
	// synced, then SERVING.
	stream, err := healthpb.NewHealthClient(dial(t, n.Socket)).Watch(wait, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("health Watch: %v", err)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("the server did not report SERVING: %v", err)
		}
		if resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return n
		}
	}
}

// write writes a manifest atomically (a rename), as editors and
// configuration tools do.
func (n *node) write(t *testing.T, name, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(n.Manifests), name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(n.Manifests, name)); err != nil {
		t.Fatal(err)
	}
}

// dial returns a grpc-go connection to the socket, closed at the end of the
// test, able to receive large lists.
func dial(t *testing.T, socket string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// manifest returns a static pod manifest.
func manifest(namespace, name, uid, image string, labels ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: %s\n  uid: %s\n", name, namespace, uid)
	if len(labels) > 0 {
		b.WriteString("  labels:\n")
		for i := 0; i+1 < len(labels); i += 2 {
			fmt.Fprintf(&b, "    %s: %q\n", labels[i], labels[i+1])
		}
	}
	fmt.Fprintf(&b, "spec:\n  containers:\n  - name: main\n    image: %s\n", image)
	return b.String()
}
