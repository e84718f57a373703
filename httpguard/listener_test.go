package httpguard

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// listenPair is a Listener on loopback and its clients, accepted one by one.
type listenPair struct {
	t *testing.T
	l *Listener
	m *ConnMetrics
}

func newListenPair(t *testing.T, max int) *listenPair {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := NewConnMetrics(MetricNames{Prefix: "test"}, nil)
	l := NewListener(ln, max, m, "test", slog.New(slog.DiscardHandler))
	t.Cleanup(func() { l.Close() })
	return &listenPair{t: t, l: l, m: m}
}

// dial connects a client and returns it with the Conn the listener
// accepted for it (nil if it was refused: the Accept then waits for the
// next connection, which the test's end closes).
func (p *listenPair) dial() (net.Conn, *Conn) {
	p.t.Helper()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := p.l.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err := net.Dial("tcp", p.l.Addr().String())
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { client.Close() })
	select {
	case c := <-accepted:
		p.t.Cleanup(func() { c.Close() })
		return client, c.(*Conn)
	case <-time.After(2 * time.Second):
		// Refused: the Accept goes on waiting for another connection.
		return client, nil
	}
}

// closedSince reports how long after start c's peer had closed it, failing
// the test if it did not within a minute.
func closedSince(t *testing.T, c net.Conn, start time.Time) time.Duration {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	_, err := c.Read(make([]byte, 1))
	if !errors.Is(err, io.EOF) {
		var ne net.Error
		if !errors.As(err, &ne) || ne.Timeout() {
			t.Fatalf("the connection was not closed: %v", err)
		}
	}
	return time.Since(start)
}

// stillOpen fails the test if c's peer closed it.
func stillOpen(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(3 * shedCloseDelay))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("the connection was closed (%v), want it open", err)
	}
}

// At the bound, a new connection sheds one without an authenticated
// caller's work in flight, never-authenticated ones first, the idlest first,
// skipping those with unread bytes unless they carried only requests without
// valid credentials; it is refused when every connection is
// held. A shed socket is closed shedCloseDelay later, on the real clock.
func TestListenerSheds(t *testing.T) {
	for _, tc := range []struct {
		name string
		// prepare sets up the two connections at the bound (a is the
		// older), and returns which is shed: 0 a, 1 b, -1 none (refused).
		prepare func(t *testing.T, a, b *Conn, ca, cb net.Conn) int
	}{
		{name: "the idlest", prepare: func(*testing.T, *Conn, *Conn, net.Conn, net.Conn) int { return 0 }},
		{name: "never authenticated first", prepare: func(_ *testing.T, a, _ *Conn, _, _ net.Conn) int {
			a.Hold()() // a caller authenticated on a, and is done
			return 1
		}},
		{name: "requests without valid credentials first", prepare: func(_ *testing.T, _, b *Conn, _, _ net.Conn) int {
			b.anonymous.Store(true) // as Track marks it
			return 1
		}},
		{name: "an authenticated caller's work is never shed", prepare: func(_ *testing.T, a, _ *Conn, _, _ net.Conn) int {
			a.Hold()
			return 1
		}},
		{name: "unread bytes skipped", prepare: func(t *testing.T, a, _ *Conn, ca, _ net.Conn) int {
			if _, err := ca.Write([]byte("GET")); err != nil {
				t.Fatal(err)
			}
			// The bytes are in a's socket once the kernel has moved them:
			// poll for them, bounded by the test's deadline.
			for !hasUnread(a.Conn) {
				time.Sleep(time.Millisecond)
			}
			return 1
		}},
		{name: "unread bytes do not spare requests without valid credentials", prepare: func(t *testing.T, a, b *Conn, ca, _ net.Conn) int {
			a.anonymous.Store(true)
			b.anonymous.Store(true)
			if _, err := ca.Write([]byte("GET")); err != nil {
				t.Fatal(err)
			}
			for !hasUnread(a.Conn) {
				time.Sleep(time.Millisecond)
			}
			return 0
		}},
		{name: "every connection held: refused", prepare: func(_ *testing.T, a, b *Conn, _, _ net.Conn) int {
			a.Hold()
			b.Hold()
			return -1
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newListenPair(t, 2)
			ca, a := p.dial()
			cb, b := p.dial()
			shed := tc.prepare(t, a, b, ca, cb)
			start := time.Now()
			cc, c := p.dial()
			if shed < 0 {
				if c != nil {
					t.Fatal("a connection beyond two held ones was accepted")
				}
				closedSince(t, cc, start)
				if got := testutil.ToFloat64(p.m.rejected); got != 1 {
					t.Errorf("rejected = %v, want 1", got)
				}
				return
			}
			if c == nil {
				t.Fatal("the new connection was refused")
			}
			victim, kept := ca, cb
			if shed == 1 {
				victim, kept = cb, ca
			}
			// The victim was shed after start, and its socket closed
			// shedCloseDelay after that.
			if d := closedSince(t, victim, start); d < shedCloseDelay {
				t.Errorf("the shed connection was closed %v after the new one came, want %v or more", d, shedCloseDelay)
			}
			stillOpen(t, kept)
			if got := testutil.ToFloat64(p.m.shed); got != 1 {
				t.Errorf("shed = %v, want 1", got)
			}
			if got := p.l.Open(); got != 2 {
				t.Errorf("open = %d, want 2", got)
			}
		})
	}
}
