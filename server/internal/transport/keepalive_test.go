package transport

import (
	"log/slog"
	"net"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2"

	"github.com/podsapi/podsapi/httpguard"
	"github.com/podsapi/podsapi/socket"
)

// stalledClosed returns podsapi_stalled_connections_closed_total of reg.
func stalledClosed(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "podsapi_stalled_connections_closed_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no podsapi_stalled_connections_closed_total")
	return 0
}

// serveSynctest serves a handler through a Transport of cfg on a pipe
// listener, inside a synctest bubble, and returns the listener; the server
// and its reaper stop at the end of the bubble's test.
func serveSynctest(t *testing.T, cfg Config, h http.Handler) (*Transport, *pipeListener, *httpguard.Listener) {
	t.Helper()
	cfg.PeerCred = func(net.Conn) (socket.Cred, error) { return socket.Cred{UID: 0}, nil }
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	tr := New(cfg)
	pl := newPipeListener()
	srv := tr.Server(h)
	stop := make(chan struct{})
	served, reaped := make(chan struct{}), make(chan struct{})
	cl := tr.Listen(pl).(*httpguard.Listener)
	go func() { defer close(served); _ = srv.Serve(cl) }()
	go func() { defer close(reaped); tr.Run(stop) }()
	t.Cleanup(func() {
		srv.Close()
		close(stop)
		<-served
		<-reaped
	})
	return tr, pl, cl
}

// TestKeepalive runs the keepalive on synctest's clock: a peer that sends
// its preface and then stays silent, answering no PING, is pinged once the
// connection has been silent for the interval, and closed when the ping
// has gone unanswered for the timeout.
func TestKeepalive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, timeout = time.Minute, 20 * time.Second
		_, pl, _ := serveSynctest(t, Config{KeepaliveInterval: interval, KeepaliveTimeout: timeout}, http.NotFoundHandler())
		c := pl.dial()
		defer c.Close()
		go func() {
			_, _ = c.Write([]byte(http2.ClientPreface))
			_ = http2.NewFramer(c, nil).WriteSettings()
		}()
		start := time.Now()
		rd := http2.NewFramer(nil, c)
		var pinged time.Duration
		for {
			f, err := rd.ReadFrame()
			if err != nil {
				break
			}
			if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() && pinged == 0 {
				pinged = time.Since(start)
			}
		}
		if pinged != interval {
			t.Fatalf("pinged after %v of silence, want the interval, %v", pinged, interval)
		}
		if d := time.Since(start); d != interval+timeout {
			t.Fatalf("closed after %v, want the interval and the timeout, %v", d, interval+timeout)
		}
	})
}

// TestStalledConnectionClosed runs the stall guard on synctest's clock over
// a pipe, whose writes block until the peer reads: a client that sends its
// preface and SETTINGS and never reads keeps the server's first write (its SETTINGS)
// blocked, and the connection is closed, counted and its slot freed after
// the write-stall timeout, within a tick of the reaper.
func TestStalledConnectionClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stall = 40 * time.Second
		reg := prometheus.NewRegistry()
		_, pl, cl := serveSynctest(t, Config{WriteStallTimeout: stall, Registry: reg}, http.NotFoundHandler())
		c := pl.dial()
		defer c.Close()
		// The server reads what the client writes; its own writes (its
		// SETTINGS first) no one reads.
		if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
			t.Fatal(err)
		}
		if err := http2.NewFramer(c, nil).WriteSettings(); err != nil {
			t.Fatal(err)
		}
		most := stall * (httpguard.StallTicks + 1) / httpguard.StallTicks
		time.Sleep(stall - time.Second)
		synctest.Wait()
		if n := stalledClosed(t, reg); n != 0 {
			t.Fatalf("the connection was closed before the write-stall timeout")
		}
		time.Sleep(most - stall + time.Second)
		synctest.Wait()
		if n := stalledClosed(t, reg); n != 1 {
			t.Fatalf("podsapi_stalled_connections_closed_total = %v a tick after the timeout, want 1", n)
		}
		if got := cl.Open(); got != 0 {
			t.Fatalf("podsapi_connections_open = %v once the stalled connection is closed, want 0", got)
		}
		if _, err := c.Write([]byte{0}); err == nil {
			t.Fatal("the stalled connection is still open")
		}
	})
}
