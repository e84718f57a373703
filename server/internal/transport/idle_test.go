package transport

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2"

	"github.com/podsapi/podsapi/socket"
)

// pipeListener is a listener of in-memory connections (net.Pipe), whose
// waits synctest sees as durable.
type pipeListener struct {
	conns     chan net.Conn
	closeOnce sync.Once
	closed    chan struct{}
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.UnixAddr{Name: "pipe", Net: "unix"} }

// dial returns the client end of a new connection.
func (l *pipeListener) dial() net.Conn {
	server, client := net.Pipe()
	l.conns <- server
	return client
}

// TestIdleTimeout runs the transport's server on synctest's clock: a
// connection without calls gets a GOAWAY and is closed when the idle
// timeout has passed, not before.
func TestIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = 5 * time.Minute
		tr := New(Config{
			IdleTimeout: idle,
			PeerCred:    func(net.Conn) (socket.Cred, error) { return socket.Cred{UID: 0}, nil },
			Registry:    prometheus.NewRegistry(),
			Logger:      slog.New(slog.DiscardHandler),
		})
		pl := newPipeListener()
		srv := tr.Server(http.NotFoundHandler())
		served := make(chan error, 1)
		go func() { served <- srv.Serve(tr.Listen(pl)) }()
		defer func() {
			srv.Close()
			if err := <-served; !errors.Is(err, http.ErrServerClosed) {
				t.Errorf("Serve: %v", err)
			}
		}()

		c := pl.dial()
		defer c.Close()
		start := time.Now()
		// The pipe has no buffer: one goroutine writes the client's
		// frames while this one reads the server's.
		rd, wr := http2.NewFramer(nil, c), http2.NewFramer(c, nil)
		acks := make(chan struct{}, 1)
		go func() {
			_, _ = c.Write([]byte(http2.ClientPreface))
			_ = wr.WriteSettings()
			for range acks {
				_ = wr.WriteSettingsAck()
			}
		}()
		defer close(acks)
		for {
			f, err := rd.ReadFrame()
			if err != nil {
				t.Fatalf("the connection ended without a GOAWAY after %v: %v", time.Since(start), err)
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					acks <- struct{}{}
				}
			case *http2.GoAwayFrame:
				if d := time.Since(start); d != idle {
					t.Fatalf("GOAWAY after %v, want the idle timeout, %v", d, idle)
				}
				return
			}
		}
	})
}

// TestIdleTimeoutOpenStream: a connection with a call open is not idle,
// however long the call lasts; once the call ends, the connection gets its
// GOAWAY the idle timeout later.
func TestIdleTimeoutOpenStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = 5 * time.Minute
		release := make(chan struct{})
		_, pl, _ := serveSynctest(t, Config{IdleTimeout: idle}, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-release
		}))
		cc, err := (&http2.Transport{}).NewClientConn(pl.dial())
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		req, err := http.NewRequest(http.MethodPost, "http://pipe/watch", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := cc.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * idle)
		synctest.Wait()
		if s := cc.State(); s.Closing || s.Closed {
			t.Fatalf("a connection with a call open for %v was closed: %+v", 3*idle, s)
		}
		close(release)
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		time.Sleep(idle - time.Second)
		synctest.Wait()
		if s := cc.State(); s.Closing || s.Closed {
			t.Fatalf("the connection was closed before the idle timeout: %+v", s)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if s := cc.State(); !s.Closing && !s.Closed {
			t.Fatalf("the connection is open the idle timeout after its last call: %+v", s)
		}
	})
}
