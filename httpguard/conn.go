package httpguard

import (
	"context"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/podsapi/podsapi/guard"
)

// Conn is a connection of a Listener: it frees its slot when closed, knows
// when it last read, whether work for an authenticated caller is in flight
// on it (Hold) and whether a caller ever authenticated on it, and follows
// its requests (Track) and, with a StallGuard, its writes.
type Conn struct {
	net.Conn
	l *Listener

	// lastRead is when bytes were last read (accepted, before any), in
	// Unix nanoseconds.
	lastRead atomic.Int64
	// holds counts the work in flight for authenticated callers: while it
	// is not zero, the connection is not shed.
	holds atomic.Int32
	// authenticated is set once a caller authenticated on the connection;
	// anonymous once a request on it ended without an authenticated
	// caller (Track).
	authenticated, anonymous atomic.Bool
	// isShed is set when the connection is shed: its slot is free, it is
	// read no more, and its socket is closed later (shed).
	isShed atomic.Bool
	// stall follows the writes, when not nil.
	stall *writeClock
	// peerOf is the peer the connection's logs name (SetPeer); nil: none.
	peerOf atomic.Pointer[guard.Peer]
	// stateRelease ends the hold of HoldStates, when one is taken.
	stateRelease atomic.Pointer[func()]

	// released is under l.mu: the slot is free.
	released bool

	mu       sync.Mutex
	closed   bool
	onClose  []func()
	requests map[*request]struct{} // in flight (Track)
	goAway   *time.Timer           // armed by GoAway; nil: not going away
}

// Read reads from the connection, marking when bytes arrived; a shed
// connection reads no more. Its reads fail as a read deadline fails them,
// which net/http answers with nothing (an error it did not expect, it
// would answer 400 Bad Request).
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.isShed.Load() {
		return 0, os.ErrDeadlineExceeded
	}
	if n > 0 {
		c.lastRead.Store(time.Now().UnixNano())
	}
	return n, err
}

// Write writes to the connection, followed by the stall guard.
func (c *Conn) Write(p []byte) (int, error) {
	if c.stall == nil {
		return c.Conn.Write(p)
	}
	c.stall.begin()
	defer c.stall.end()
	return c.Conn.Write(p)
}

// Close closes the connection and frees its slot; the socket of a shed
// connection is closed by shed, a little later.
func (c *Conn) Close() error {
	var err error
	if !c.isShed.Load() {
		err = c.Conn.Close()
	}
	c.release()
	return err
}

// NetConn returns the connection below, as tls.Conn.NetConn does.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// Hold marks work in flight for an authenticated caller (a request whose
// caller was authenticated, a gRPC call of a peer the access policy
// allows): the connection is not shed until release is called (once; more
// calls do nothing). It also marks the connection as one on which a caller
// authenticated.
func (c *Conn) Hold() (release func()) {
	c.authenticated.Store(true)
	c.holds.Add(1)
	var once sync.Once
	return func() { once.Do(func() { c.holds.Add(-1) }) }
}

// SetPeer names the peer of the connection in the logs of its stalls.
func (c *Conn) SetPeer(p *guard.Peer) { c.peerOf.Store(p) }

func (c *Conn) peer() *guard.Peer { return c.peerOf.Load() }

// OnClose has f called once the connection is closed (or shed) and its
// slot freed.
func (c *Conn) OnClose(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		go f()
		return
	}
	c.onClose = append(c.onClose, f)
}

// shed frees c's slot at once, stops the server reading it, and closes its
// socket after shedCloseDelay (at once when maxDelayedSheds wait already).
func (c *Conn) shed() {
	select {
	case c.l.delayed <- struct{}{}:
	default:
		_ = c.Close()
		return
	}
	c.isShed.Store(true)
	_ = c.Conn.SetReadDeadline(time.Unix(1, 0)) // the server's read ends now
	c.release()
	time.AfterFunc(shedCloseDelay, func() {
		_ = c.Conn.Close()
		<-c.l.delayed
	})
}

// release frees the connection's slot and tells who asked, once.
func (c *Conn) release() {
	c.l.mu.Lock()
	c.l.forget(c)
	c.l.mu.Unlock()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	hooks := c.onClose
	c.onClose = nil
	if c.goAway != nil {
		c.goAway.Stop()
	}
	c.mu.Unlock()
	if c.stall != nil {
		c.stall.g.unwatch(c.stall)
	}
	for _, f := range hooks {
		f()
	}
	if c.l.closed != nil {
		c.l.closed()
	}
}

// hasUnread reports whether bytes the peer sent wait in c's socket.
func hasUnread(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	_ = raw.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) })
	return n > 0
}

// ConnOf returns the Conn below c (c itself, a tls.Conn over it, or any
// connection whose NetConn leads to it), or nil.
func ConnOf(c net.Conn) *Conn {
	for c != nil {
		if gc, ok := c.(*Conn); ok {
			return gc
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = u.NetConn()
	}
	return nil
}

type connKey struct{}

// WithConn gives the requests of connection c their Conn (ConnFrom); it is
// an http.Server.ConnContext, or part of one.
func WithConn(ctx context.Context, c net.Conn) context.Context {
	if gc := ConnOf(c); gc != nil {
		return context.WithValue(ctx, connKey{}, gc)
	}
	return ctx
}

// ConnFrom returns the Conn of a request's context, or nil.
func ConnFrom(ctx context.Context) *Conn {
	c, _ := ctx.Value(connKey{}).(*Conn)
	return c
}
