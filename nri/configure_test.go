package nri_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/net/multiplex"
	"github.com/containerd/ttrpc"

	"github.com/podsapi/podsapi/nri"
	"github.com/podsapi/podsapi/store"
)

// neverConfigures is a runtime side that speaks NRI's protocol as the
// adaptation does (a multiplexed connection, the Runtime service on
// ttrpc) but, after accepting a plugin's registration, never configures
// it.
type neverConfigures struct {
	registered chan struct{}

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

// serveNeverConfigures serves it on socket until the end of the test.
func serveNeverConfigures(t *testing.T, socket string) *neverConfigures {
	t.Helper()
	var lc net.ListenConfig
	l, err := lc.Listen(context.Background(), "unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	r := &neverConfigures{registered: make(chan struct{}, 64)}
	r.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			r.conns = append(r.conns, c)
			r.mu.Unlock()
			r.wg.Go(func() { r.serve(c) })
		}
	})
	t.Cleanup(func() {
		l.Close()
		r.mu.Lock()
		for _, c := range r.conns {
			c.Close()
		}
		r.mu.Unlock()
		r.wg.Wait()
	})
	return r
}

// serve answers the plugin's registration on c, until the plugin closes
// it (seen, as the adaptation sees it, by the client of the plugin's
// service on the connection).
func (r *neverConfigures) serve(c net.Conn) {
	mux := multiplex.Multiplex(c)
	defer mux.Close()
	l, err := mux.Listen(multiplex.RuntimeServiceConn)
	if err != nil {
		return
	}
	srv, err := ttrpc.NewServer()
	if err != nil {
		return
	}
	pconn, err := mux.Open(multiplex.PluginServiceConn)
	if err != nil {
		return
	}
	closed := make(chan struct{})
	plugin := ttrpc.NewClient(pconn, ttrpc.WithOnClose(func() { close(closed) }))
	defer plugin.Close()
	api.RegisterRuntimeService(srv, registrar{r.registered})
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(context.Background(), l)
	}()
	<-closed
	srv.Close()
	l.Close()
	<-served
}

// registrar accepts registrations.
type registrar struct{ registered chan<- struct{} }

func (g registrar) RegisterPlugin(context.Context, *api.RegisterPluginRequest) (*api.Empty, error) {
	select {
	case g.registered <- struct{}{}:
	default:
	}
	return &api.Empty{}, nil
}

func (registrar) UpdateContainers(context.Context, *api.UpdateContainersRequest) (*api.UpdateContainersResponse, error) {
	return nil, errors.New("no updates")
}

// TestRuntimeThatNeverConfigures connects the observer to a runtime that
// accepts its registration and never configures it: the observer gives
// each connection up after its configure timeout and connects again, and
// its goroutines do not grow from one attempt to the next (NRI's stub
// waits for its configuration without a context: without the watchdog,
// the observer would wait for ever on the first connection, and each
// abandoned stub would keep its goroutines).
func TestRuntimeThatNeverConfigures(t *testing.T) {
	socket := nriSocket(t)
	rt := serveNeverConfigures(t, socket)
	o := nri.New(socket, store.New(), nri.WithConfigureTimeout(20*time.Millisecond), nri.WithBackoff(time.Millisecond, 2*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()

	// waitRegistered waits for the observer's next registration: each
	// is a new connection, after the watchdog gave up the one before.
	waitRegistered := func(i int) {
		t.Helper()
		select {
		case <-rt.registered:
		case <-time.After(30 * time.Second):
			t.Fatalf("no registration %d within 30 s: the observer does not connect again", i)
		}
	}
	const warm, attempts = 3, 20
	for i := range warm {
		waitRegistered(i)
	}
	// At each registration the observer is in the same place: one
	// stub, registered, waiting. Counted at the warm-up's last and at
	// the last one, leaked goroutines would add several per attempt.
	base := runtime.NumGoroutine()
	for i := range attempts {
		waitRegistered(warm + i)
	}
	if err := waitGoroutines(base+4, 10*time.Second); err != nil {
		t.Errorf("after %d more connections that were never configured: %v (%d at the warm-up's last)", attempts, err, base)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the observer did not stop within 30 s of its context")
	}
}

// waitGoroutines waits until at most n goroutines run, polling the count
// (goroutines that are ending need a moment to be gone), within bound.
func waitGoroutines(n int, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		got := runtime.NumGoroutine()
		if got <= n {
			return nil
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			return fmt.Errorf("%d goroutines, want at most %d:\n%s", got, n, buf[:runtime.Stack(buf, true)])
		}
		<-tick.C
	}
}
