package httpguard

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// rejectLogInterval bounds how often refused connections are logged.
const rejectLogInterval = 10 * time.Second

// shedTries bounds the candidates shed checks for unread bytes.
const shedTries = 4

// shedCloseDelay is how long the socket of a shed connection stays open,
// unread, before it is closed: an attacker that reopens each connection the
// moment it is closed (slowloris) reopens each at most ten times a second,
// instead of as fast as the server can accept and shed (18,000 a second,
// 0.7 of a core, in make stress's lockout).
const shedCloseDelay = 100 * time.Millisecond

// maxDelayedSheds bounds the shed sockets waiting for their close: beyond
// it, a shed connection is closed at once.
const maxDelayedSheds = 1024

// Listener accepts connections, at most a number open at once, and never
// makes a new one wait. At the bound, a new connection takes the slot of
// one that is shed (closed): one with no work in flight for an
// authenticated caller (Conn.Hold); first one on which no caller ever
// authenticated and a request ended without one, then one new or slow to
// send its first request, then the others; of each, the one that has read
// nothing for longest (a silent connection's last read is its accept),
// skipping those whose bytes wait unread in the socket, unless they have
// carried only requests without valid credentials. When none can be shed,
// the new connection is closed as soon as accepted (refused). So neither idle connections, nor
// slow ones, nor a flood of requests without valid credentials (held in a
// tarpit, or waiting for a body never sent) can hold out a caller.
type Listener struct {
	net.Listener
	max     int64 // <= 0: no bound
	metrics *ConnMetrics
	stall   *StallGuard // nil: writes are not followed
	// wrap, if set, gives each accepted Conn what the server sees of it,
	// or refuses it.
	wrap             func(*Conn) (net.Conn, bool)
	accepted, closed func() // nil: no one is told
	log              *slog.Logger
	what             string // what the listener serves, for logs

	// delayed counts the shed connections whose socket waits for its
	// close.
	delayed chan struct{}
	open    atomic.Int64

	mu         sync.Mutex
	conns      map[*Conn]struct{}
	lastLog    time.Time
	unreported int
}

// ListenerOption configures NewListener.
type ListenerOption func(*Listener)

// WithStallGuard has the writes of every connection followed by g, which
// closes a connection whose write stays blocked. By default they are not.
func WithStallGuard(g *StallGuard) ListenerOption { return func(l *Listener) { l.stall = g } }

// WithWrap has wrap give each accepted connection what the server sees of
// it (the gRPC socket's carries its peer), or refuse it (false: it is
// closed and counted refused). By default the server sees the Conn.
func WithWrap(wrap func(*Conn) (net.Conn, bool)) ListenerOption {
	return func(l *Listener) { l.wrap = wrap }
}

// WithEvents calls accepted when a connection is accepted and counted, and
// closed when it is closed and its slot freed: events a test waits on. By
// default no one is told.
func WithEvents(accepted, closed func()) ListenerOption {
	return func(l *Listener) { l.accepted, l.closed = accepted, closed }
}

// NewListener returns l with at most max connections open at once (max <=
// 0: no bound), counted by m, what the listener serves named in the logs
// of log.
func NewListener(l net.Listener, max int, m *ConnMetrics, what string, log *slog.Logger, opts ...ListenerOption) *Listener {
	gl := &Listener{
		Listener: l, max: int64(max), metrics: m, what: what, log: log,
		delayed: make(chan struct{}, maxDelayedSheds),
		conns:   make(map[*Conn]struct{}, min(max, 1024)),
	}
	for _, o := range opts {
		o(gl)
	}
	return gl
}

// Accept returns the next connection within the bound, making room for it
// if it can; a connection that does not fit is closed and never returned.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		raw, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c := &Conn{Conn: raw, l: l}
		c.lastRead.Store(time.Now().UnixNano())
		if !l.admit(c) {
			// Counted before the close, which the client sees.
			l.metrics.rejected.Inc()
			_ = raw.Close()
			l.logRejected()
			continue
		}
		if l.stall != nil {
			l.stall.watchConn(c)
		}
		var served net.Conn = c
		if l.wrap != nil {
			var ok bool
			if served, ok = l.wrap(c); !ok {
				l.metrics.rejected.Inc()
				_ = c.Close()
				continue
			}
		}
		if l.accepted != nil {
			l.accepted()
		}
		return served, nil
	}
}

// admit counts c among the open connections if it fits, shedding one to
// make room if it must, and reports whether it fits. Only Accept adds to
// the connections: a slot seen free here stays free.
func (l *Listener) admit(c *Conn) bool {
	for l.max > 0 && l.open.Load() >= l.max {
		if !l.shed() {
			return false
		}
	}
	l.mu.Lock()
	l.conns[c] = struct{}{}
	l.open.Add(1)
	l.metrics.open.Add(1)
	l.mu.Unlock()
	return true
}

// shed closes the connection that may be shed first (Listener), freeing
// its slot, and reports whether there was one.
func (l *Listener) shed() bool {
	l.mu.Lock()
	var victim *Conn
	skip := make(map[*Conn]bool, shedTries)
	for range shedTries {
		best := l.candidate(skip)
		if best == nil {
			break
		}
		// Bytes waiting unread spare a connection whose next request may
		// be a caller's, but not one that has carried only requests
		// without valid credentials: its bytes are more of the same, and
		// a server slow to read a flood of them (a busy machine) would
		// otherwise spare the whole flood and refuse the valid caller.
		if best.shedRank() == 0 || !hasUnread(best.Conn) {
			victim = best
			break
		}
		skip[best] = true
	}
	if victim == nil {
		l.mu.Unlock()
		return false
	}
	// Its slot is the new connection's from now: its Close frees nothing
	// more.
	l.forget(victim)
	l.mu.Unlock()
	victim.shed()
	l.metrics.shed.Inc()
	return true
}

// candidate returns the connection to shed first, of those not in skip and
// without work in flight for an authenticated caller: one on which no
// caller ever authenticated and a request ended without one (a flood of
// requests without valid credentials), then one on which none did either
// (new, or slow to send its first request), then the others; of each, the
// one that has read nothing for longest first. nil when none may be shed.
// l.mu is held.
func (l *Listener) candidate(skip map[*Conn]bool) *Conn {
	var (
		best     *Conn
		bestRank int
		bestAt   int64
	)
	for c := range l.conns {
		if skip[c] || c.holds.Load() > 0 {
			continue
		}
		rank, at := c.shedRank(), c.lastRead.Load()
		if best == nil || rank < bestRank || (rank == bestRank && at < bestAt) {
			best, bestRank, bestAt = c, rank, at
		}
	}
	return best
}

// shedRank orders the connections that may be shed, first shed first.
func (c *Conn) shedRank() int {
	switch {
	case c.authenticated.Load():
		return 2
	case c.anonymous.Load():
		return 0
	}
	return 1
}

// forget frees the slot of c, once, and reports whether it was c's first.
// l.mu is held.
func (l *Listener) forget(c *Conn) bool {
	if c.released {
		return false
	}
	c.released = true
	delete(l.conns, c)
	// Freed under the lock that decided it: a shed that closes c while
	// another goroutine closes it too finds the slot free when it returns,
	// so Accept never counts one connection more than the bound.
	l.open.Add(-1)
	l.metrics.open.Add(-1)
	return true
}

// logRejected logs refused connections, at most once per rejectLogInterval.
func (l *Listener) logRejected() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unreported++
	if now := time.Now(); now.Sub(l.lastLog) >= rejectLogInterval {
		l.log.Warn("refused connections: every connection slot holds work in flight for an authenticated caller", "to", l.what, "refused", l.unreported, "limit", l.max)
		l.lastLog, l.unreported = now, 0
	}
}

// Open returns the number of connections open.
func (l *Listener) Open() int64 { return l.open.Load() }
