package server_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestSourceStalls: the pod source sends nothing for many idle and
// keepalive periods (the periods scaled down 1000 times: 300 ms here stand
// for five minutes at the defaults). Clients keep getting the last known
// pods, and an open watch stays open and gets the next change. The time a
// client has to answer a keepalive ping is not scaled down: a busy machine
// may take longer than 20 ms to answer, and a connection closed for that
// would be the machine's speed, not a stalled source, failing the test.
func TestSourceStalls(t *testing.T) {
	pods := podstest.SamplePods()
	f := start(t, server.Config{
		Transport: server.TransportConfig{IdleTimeout: 20 * time.Millisecond, KeepaliveInterval: 20 * time.Millisecond, KeepaliveTimeout: 10 * time.Second},
	}, false, pods...)
	for _, kind := range podstest.ClientKinds {
		c := kind.Dial(t, f.socket)
		w, err := c.Watch(ctx(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		for range len(pods) + 1 {
			podstest.Recv(t, w)
		}
		<-time.After(300 * time.Millisecond) // the stall itself
		got, err := c.List(ctx(t), nil)
		if err != nil || len(got) != len(pods) {
			t.Fatalf("%s: ListPods after the stall: %d pods, %v", kind.Name, len(got), err)
		}
		p := pods[0].DeepCopy()
		p.ResourceVersion = "after-stall-" + kind.Name
		f.store.Upsert(p)
		if rv := podstest.Recv(t, w).GetPod().GetMetadata().GetResourceVersion(); rv != p.ResourceVersion {
			t.Fatalf("%s: watch got %q after the stall, want %q", kind.Name, rv, p.ResourceVersion)
		}
	}
}

// TestRestartWithClients restarts the server on the same socket while
// clients are connected: their watches end UNAVAILABLE; the same clients
// then see FAILED_PRECONDITION until the new server's source has synced,
// and after that every pod: never part of them.
func TestRestartWithClients(t *testing.T) {
	pods := podstest.SamplePods()
	sock := podstest.SocketPath(t)
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	serve := func(st *store.Store) (stop func()) {
		srv, err := server.New(st, server.Config{Socket: sock, Logger: logger, Transport: server.TransportConfig{ShutdownTimeout: time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		sctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Serve(sctx) }()
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		}
	}
	stop := serve(storeWith(pods...))
	var clients []podstest.APIClient
	var watches []podstest.WatchStream
	for _, kind := range podstest.ClientKinds {
		c := kind.Dial(t, sock)
		clients = append(clients, c)
		w, err := c.Watch(ctx(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		for range len(pods) + 1 {
			podstest.Recv(t, w)
		}
		watches = append(watches, w)
	}
	stop()
	for i, w := range watches {
		if _, err := w.Recv(); podstest.ErrorCode(err) != connect.CodeUnavailable {
			t.Fatalf("watch %d ended with %v, want Unavailable", i, err)
		}
	}
	// The new server reads its source while clients call.
	st := store.New()
	defer serve(st)()
	for i, c := range clients {
		// Until it listens, calls fail UNAVAILABLE; then FAILED_PRECONDITION.
		for {
			_, err := c.List(ctx(t), nil)
			if podstest.ErrorCode(err) == connect.CodeFailedPrecondition {
				break
			}
			if podstest.ErrorCode(err) != connect.CodeUnavailable {
				t.Fatalf("client %d before sync: %v, want FailedPrecondition", i, err)
			}
		}
	}
	for _, p := range pods[:2] {
		st.Upsert(p)
		for i, c := range clients {
			if got, err := c.List(ctx(t), nil); podstest.ErrorCode(err) != connect.CodeFailedPrecondition {
				t.Fatalf("client %d during the initial read: %d pods, %v; want FailedPrecondition, never part of the pods", i, len(got), err)
			}
		}
	}
	st.Upsert(pods[2])
	st.MarkSynced()
	for i, c := range clients {
		if got, err := c.List(ctx(t), nil); err != nil || len(got) != len(pods) {
			t.Fatalf("client %d after sync: %d pods, %v; want all %d", i, len(got), err, len(pods))
		}
		w, err := c.Watch(ctx(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		for range len(pods) + 1 {
			podstest.Recv(t, w)
		}
	}
}
