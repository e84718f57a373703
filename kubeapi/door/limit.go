package door

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// limitListener accepts at most a number of connections open at once, and
// never makes a new one wait: at the bound, it closes the connection that
// has carried nothing for longest (one with no request in flight: idle
// between requests, or new and still to send its first), preferring one on
// which no caller has authenticated, to make room; when every connection
// has a request in flight, it refuses the new one (closes it at once). So
// idle or unauthenticated connections cannot hold out a caller, as
// netutil.LimitListener's queue lets them (and its connections also hide
// the socket below them, which the peer credentials of the UNIX socket
// need).
//
// The state of each connection comes from http.Server.ConnState
// (trackState); that a caller authenticated on it, from the Door
// (connFrom(ctx).authenticated).
type limitListener struct {
	net.Listener
	max int
	now func() time.Time
	// onEvict and onRefuse count a connection closed to make room, and a
	// new one refused; nil: not counted.
	onEvict, onRefuse func()

	mu    sync.Mutex
	conns map[*limitConn]struct{}
}

func newLimitListener(l net.Listener, n int) *limitListener {
	return &limitListener{Listener: l, max: n, now: time.Now, conns: make(map[*limitConn]struct{}, min(n, 1024))}
}

// Accept returns the next connection that fits, making room for it if it
// can; a connection that does not fit is closed and never returned.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &limitConn{Conn: c, l: l}
		lc.setState(http.StateNew, l.now())
		if victim, ok := l.admit(lc); ok {
			if victim != nil {
				_ = victim.Close()
				if l.onEvict != nil {
					l.onEvict()
				}
			}
			return lc, nil
		}
		_ = c.Close()
		if l.onRefuse != nil {
			l.onRefuse()
		}
	}
}

// admit counts c among the open connections if it fits, returning the
// connection to close to make room for it, if any; ok is false when none
// can be closed.
func (l *limitListener) admit(c *limitConn) (victim *limitConn, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.conns) >= l.max {
		if victim = l.victim(); victim == nil {
			return nil, false
		}
		// Its slot is c's from now: its Close releases nothing more.
		delete(l.conns, victim)
	}
	l.conns[c] = struct{}{}
	return victim, true
}

// victim returns the connection to close to make room: of those with no
// request in flight, an unauthenticated one before an authenticated one,
// and the one in its state longest first; nil when every connection has a
// request in flight. l.mu is held.
func (l *limitListener) victim() *limitConn {
	var (
		best     *limitConn
		bestAuth bool
		bestAt   int64
	)
	for c := range l.conns {
		st, at := c.stateAt()
		if st != http.StateNew && st != http.StateIdle {
			continue
		}
		auth := c.authenticated.Load()
		if best == nil || (!auth && bestAuth) || (auth == bestAuth && at < bestAt) {
			best, bestAuth, bestAt = c, auth, at
		}
	}
	return best
}

// release forgets c, whose slot is free again.
func (l *limitListener) release(c *limitConn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// open returns the number of connections counted open.
func (l *limitListener) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// limitConn is a connection of a limitListener: it frees its slot when
// closed, and knows its http.ConnState and whether a caller authenticated
// on it.
type limitConn struct {
	net.Conn
	l *limitListener
	// state is the http.ConnState, since the UnixNano when it was entered.
	state         atomic.Int32
	since         atomic.Int64
	authenticated atomic.Bool
	closeOnce     sync.Once
	// closing is the timer that closes the connection after an
	// unauthenticated answer (closeAfter); nil: none.
	closing atomic.Pointer[time.Timer]
}

func (c *limitConn) setState(s http.ConnState, now time.Time) {
	c.since.Store(now.UnixNano())
	c.state.Store(int32(s))
}

func (c *limitConn) stateAt() (http.ConnState, int64) {
	return http.ConnState(c.state.Load()), c.since.Load()
}

// Close closes the connection and frees its slot.
func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() {
		c.l.release(c)
		if t := c.closing.Load(); t != nil {
			t.Stop()
		}
	})
	return err
}

// closeAfter closes the connection after d, once: whatever its streams
// are doing then (a client that does not read holds them).
func (c *limitConn) closeAfter(d time.Duration) {
	if c.closing.Load() != nil {
		return
	}
	t := time.AfterFunc(d, func() { _ = c.Close() })
	if !c.closing.CompareAndSwap(nil, t) {
		t.Stop()
	}
}

// NetConn returns the connection below, as tls.Conn.NetConn does.
func (c *limitConn) NetConn() net.Conn { return c.Conn }

// asLimitConn returns the limitConn below c (a tls.Conn, or itself), or
// nil.
func asLimitConn(c net.Conn) *limitConn {
	for {
		if lc, ok := c.(*limitConn); ok {
			return lc
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = u.NetConn()
	}
}

// trackState is the http.Server.ConnState of a server of limitListeners.
func trackState(c net.Conn, s http.ConnState) {
	if lc := asLimitConn(c); lc != nil {
		lc.setState(s, lc.l.now())
	}
}

type connKey struct{}

// withConn gives the requests of connection c their connection, for the
// Door to mark (connFrom).
func withConn(ctx context.Context, c net.Conn) context.Context {
	if lc := asLimitConn(c); lc != nil {
		return context.WithValue(ctx, connKey{}, lc)
	}
	return ctx
}

// connFrom returns the connection of a request served by Server, or nil.
func connFrom(ctx context.Context) *limitConn {
	c, _ := ctx.Value(connKey{}).(*limitConn)
	return c
}
