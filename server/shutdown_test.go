package server_test

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"connectrpc.com/connect"

	"github.com/podsapi/podsapi/errinfo"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestShutdown stops a server with open watches: they end with UNAVAILABLE,
// Serve returns and the socket is gone.
func TestShutdown(t *testing.T) {
	for _, kind := range podstest.ClientKinds {
		t.Run(kind.Name, func(t *testing.T) {
			st := storeWith(podstest.SamplePods()...)
			sock := podstest.SocketPath(t)
			srv, err := server.New(st, server.Config{Socket: sock, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
			if err != nil {
				t.Fatal(err)
			}
			sctx, stop := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- srv.Serve(sctx) }()

			c := kind.Dial(t, sock)
			var watches []podstest.WatchStream
			for range 3 {
				w, err := c.Watch(ctx(t), nil)
				if err != nil {
					t.Fatal(err)
				}
				for range len(podstest.SamplePods()) + 1 {
					podstest.Recv(t, w)
				}
				watches = append(watches, w)
			}
			stop()
			for i, w := range watches {
				if _, err := w.Recv(); podstest.ErrorCode(err) != connect.CodeUnavailable || podstest.ErrorReason(err) != errinfo.ShuttingDown {
					t.Fatalf("watch %d ended with %v, want Unavailable", i, err)
				}
			}
			if err := <-done; err != nil {
				t.Fatalf("Serve: %v", err)
			}
			if _, err := os.Lstat(sock); !os.IsNotExist(err) {
				t.Fatalf("socket still exists after shutdown: %v", err)
			}
		})
	}
}
