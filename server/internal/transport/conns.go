package transport

import (
	"container/list"
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/podsapi/podsapi/guard"
	"github.com/podsapi/podsapi/socket"
)

// rejectLogInterval bounds how often refused connections are logged.
const rejectLogInterval = 10 * time.Second

// connListener accepts the connections of a socket, at most max open at
// once (max <= 0: no limit). When the slots are full, a new connection
// takes the slot of the oldest one that is waiting (one that has not
// started a request: a slow or silent preface, or an idle metrics
// scrape), which is closed; when none waits, the new connection is closed
// as soon as accepted. A slowloris client can thus hold only the slots
// nobody else asks for. With peerCred set, each connection carries its
// peer's credentials, read when it is accepted.
type connListener struct {
	net.Listener
	max      int64
	peerCred func(net.Conn) (socket.Cred, error) // nil: no credentials (metrics)
	// cgroup reads a peer's cgroup file, which names it (guard.Peer.Client).
	cgroup   func(ctx context.Context, pid int32) (string, error)
	open     atomic.Int64
	rejected prometheus.Counter
	shed     prometheus.Counter
	floods   *prometheus.CounterVec // nil: frames are not followed
	stall    *stallGuard            // nil: writes are not followed
	accepted func()                 // nil: no one is told of an accept
	closed   func()                 // nil: no one is told of a close
	log      *slog.Logger
	logs     *guard.LogLimiter
	what     string // what the listener serves, for logs

	// A peer the access policy denies may keep deniedShare connections
	// (<= 0: any number): health, all it may call, needs one.
	denies      func(*guard.Peer) bool
	deniedShare int

	// delayedSheds counts the shed connections whose socket waits for its
	// close (peerConn.shed).
	delayedSheds atomic.Int64

	mu         sync.Mutex
	waiting    list.List      // of *peerConn that may be shed, oldest first
	denied     map[uint32]int // connections open by denied UID
	lastLog    time.Time
	unreported int
}

// connMetrics names the metrics of a connListener.
type connMetrics struct {
	prefix string // of the metric names
	what   string // in their help texts
	flag   string // that sets the limit
}

// The metrics of the API socket and of the metrics endpoint.
var (
	apiConnMetrics     = connMetrics{prefix: "podsapi_connections", what: "the API socket", flag: "--max-connections"}
	metricsConnMetrics = connMetrics{prefix: "podsapi_metrics_connections", what: "the metrics endpoint", flag: "--metrics-max-connections"}
)

func newConnListener(l net.Listener, max int, names connMetrics, reg prometheus.Registerer, log *slog.Logger) *connListener {
	cl := &connListener{
		Listener: l,
		max:      int64(max),
		log:      log,
		logs:     guard.NewLogLimiter(log, guard.PeerLogInterval),
		what:     names.what,
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: names.prefix + "_rejected_total",
			Help: "Number of connections to " + names.what + " closed as soon as accepted because " + names.flag + " were open and busy.",
		}),
		shed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: names.prefix + "_shed_total",
			Help: "Number of connections to " + names.what + " closed to make room for a new one because " + names.flag + " were open: the oldest that had not started a request (or, for metrics, was idle).",
		}),
	}
	reg.MustRegister(cl.rejected, cl.shed, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: names.prefix + "_open",
		Help: "Number of connections open on " + names.what + ".",
	}, func() float64 { return float64(cl.open.Load()) }))
	return cl
}

// Accept returns the next connection within the limit, carrying its peer.
func (l *connListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		// Only Accept adds to open: a slot seen free here stays free.
		if l.max > 0 && l.open.Load() >= l.max && !l.shedOldest() {
			// Counted before the close, which the client sees.
			l.rejected.Inc()
			c.Close()
			l.logRejected()
			continue
		}
		l.open.Add(1)
		p := &guard.Peer{}
		if l.peerCred == nil {
			// No credentials to read: not a UNIX socket of the API.
		} else if cred, err := l.peerCred(c); err == nil {
			*p = guard.Peer{Known: true, PID: cred.PID, UID: cred.UID, GID: cred.GID, Groups: cred.Groups, Cgroup: l.cgroup}
		} else {
			l.log.Debug("cannot read the peer credentials of a connection", "error", err)
		}
		pc := &peerConn{Conn: c, peer: p, l: l}
		if !l.admitDenied(pc) {
			l.rejected.Inc()
			pc.Close()
			l.logs.Warn(p, "refused a connection: the client is not allowed to call the API and has too many connections open for health checks", "limit", l.deniedShare)
			continue
		}
		pc.lastRead.Store(time.Now().UnixNano())
		if l.floods != nil {
			pc.frames = newFrameGuard()
		}
		if l.stall != nil {
			l.stall.watchConn(pc)
		}
		l.setWaiting(pc, true)
		if l.accepted != nil {
			l.accepted()
		}
		return pc, nil
	}
}

// newFloodCounter returns the counter of the connections closed for a frame
// flood: the API socket speaks HTTP/2, and its floods are cut short.
func newFloodCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	floods := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "podsapi_connections_flood_closed_total",
		Help: "Number of connections closed for an HTTP/2 frame flood net/http lets through, by reason: more than 32 CONTINUATION frames in a header block, or RST_STREAM frames beyond 100/s (burst 1000, Rapid Reset).",
	}, []string{"reason"})
	reg.MustRegister(floods)
	return floods
}

// limitDenied lets a peer access denies keep at most share connections.
func (l *connListener) limitDenied(access *guard.AccessGuard, share int) {
	if access == nil || share <= 0 {
		return
	}
	l.denies = func(p *guard.Peer) bool { return !access.Allows(p) }
	l.deniedShare = share
	l.denied = make(map[uint32]int)
}

// admitDenied counts c if its peer is denied, and reports whether it is
// within the share of its UID.
func (l *connListener) admitDenied(c *peerConn) bool {
	if l.denies == nil || !l.denies(c.peer) {
		return true
	}
	uid := peerUID(c.peer)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.denied[uid] >= l.deniedShare {
		return false
	}
	l.denied[uid]++
	c.deniedUID, c.countedDenied = uid, true
	return true
}

// shedTries bounds the candidates shedOldest checks for unread bytes.
const shedTries = 4

// shedOldest closes the waiting connection that has made no progress for
// the longest time (the oldest last read; a silent connection's is its
// accept), skipping those whose bytes wait unread in the socket (a client
// whose request the server has not read yet is no slowloris), freeing its
// slot, and reports whether there was one. A client whose preface or
// request the server has just read is thus shed last.
func (l *connListener) shedOldest() bool {
	l.mu.Lock()
	var pc *peerConn
	skip := make(map[*peerConn]bool, shedTries)
	for range shedTries {
		var best *peerConn
		for e := l.waiting.Front(); e != nil; e = e.Next() {
			c := e.Value.(*peerConn)
			if !skip[c] && (best == nil || c.lastRead.Load() < best.lastRead.Load()) {
				best = c
			}
		}
		if best == nil {
			break
		}
		if !hasUnread(best.Conn) {
			pc = best
			break
		}
		skip[best] = true
	}
	if pc == nil {
		l.mu.Unlock()
		return false
	}
	l.waiting.Remove(pc.elem)
	pc.elem = nil
	l.mu.Unlock()
	pc.shed()
	l.shed.Inc()
	return true
}

// shedCloseDelay is how long the socket of a shed connection stays open,
// unread, before it is closed: an attacker that reopens each connection the
// moment it is closed (slowloris) reopens each at most ten times a second,
// instead of as fast as the server can accept and shed (18,000 a second,
// 0.7 of a core, in make stress's lockout).
const shedCloseDelay = 100 * time.Millisecond

// maxDelayedSheds bounds the shed sockets waiting for their close: beyond
// it, a shed connection is closed at once.
const maxDelayedSheds = 1024

// shed frees c's slot at once, stops the server reading it, and closes its
// socket after shedCloseDelay.
func (c *peerConn) shed() {
	if c.l.delayedSheds.Add(1) > maxDelayedSheds {
		c.l.delayedSheds.Add(-1)
		c.Close()
		return
	}
	c.isShed.Store(true)
	c.release()
	_ = c.Conn.SetReadDeadline(time.Unix(1, 0)) // the server's read ends now
	time.AfterFunc(shedCloseDelay, func() {
		c.Conn.Close()
		c.l.delayedSheds.Add(-1)
	})
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

// setWaiting marks c as waiting (it may be shed) or busy.
func (l *connListener) setWaiting(c *peerConn, waiting bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case c.closed:
	case waiting && c.elem == nil:
		c.elem = l.waiting.PushBack(c)
	case !waiting && c.elem != nil:
		l.waiting.Remove(c.elem)
		c.elem = nil
	}
}

// logRejected logs refused connections, at most once per rejectLogInterval.
func (l *connListener) logRejected() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unreported++
	if now := time.Now(); now.Sub(l.lastLog) >= rejectLogInterval {
		l.log.Warn("refused connections: all connection slots are busy", "to", l.what, "refused", l.unreported, "limit", l.max)
		l.lastLog, l.unreported = now, 0
	}
}

// peerConn is an accepted connection and its peer.
type peerConn struct {
	net.Conn
	peer *guard.Peer
	l    *connListener

	// Under l.mu.
	elem          *list.Element // in l.waiting while the connection may be shed
	closed        bool
	countedDenied bool // in l.denied[deniedUID]
	deniedUID     uint32
	// started is set by the first request (API socket).
	started atomic.Bool
	// frames follows the HTTP/2 frames read, when not nil (API socket).
	frames *frameGuard
	// lastRead is when bytes were last read (accepted, before any), in
	// Unix nanoseconds.
	lastRead atomic.Int64
	// stall follows the writes, when not nil (API socket).
	stall *writeClock
	// isShed is set when the connection is shed: its slot is free, it is
	// read no more, and its socket is closed later (shed).
	isShed atomic.Bool
	// ahead holds what a read smaller than readAhead took from the socket
	// beyond it; buffered is the part not read yet, and readErr the error
	// of that read, returned once buffered is.
	ahead    [readAhead]byte
	buffered []byte
	readErr  error
}

// readAhead is the most bytes a read of fewer bytes takes from the socket,
// to keep for the next ones: net/http reads each HTTP/2 frame's header and
// payload with a read of its own, and a client reading a large response
// answers with two WINDOW_UPDATE frames (13 bytes each) for every few KiB
// it reads, so that without it the server made four reads of the socket
// for every 5 KiB it wrote to a herd of 1,000 watches.
const readAhead = 512

// Write writes to the connection, followed by the stall guard.
func (c *peerConn) Write(p []byte) (int, error) {
	if c.stall == nil {
		return c.Conn.Write(p)
	}
	c.stall.begin()
	defer c.stall.end()
	return c.Conn.Write(p)
}

// Read reads from the connection, and closes it on a frame flood. A read of
// fewer than readAhead bytes takes what the socket has up to readAhead, and
// the next reads are served from it first. Only one goroutine reads a
// connection at a time: the server's.
func (c *peerConn) Read(p []byte) (int, error) {
	if len(c.buffered) > 0 {
		n := copy(p, c.buffered)
		c.buffered = c.buffered[n:]
		return n, nil
	}
	if err := c.readErr; err != nil {
		c.readErr = nil
		return 0, err
	}
	if len(p) >= readAhead || len(p) == 0 {
		return c.read(p)
	}
	n, err := c.read(c.ahead[:])
	m := copy(p, c.ahead[:n])
	if m < n {
		c.buffered, c.readErr = c.ahead[m:n], err
		return m, nil
	}
	return m, err
}

// read reads from the socket, and closes the connection on a frame flood.
func (c *peerConn) read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.isShed.Load() {
		return 0, net.ErrClosed
	}
	if n > 0 {
		c.lastRead.Store(time.Now().UnixNano())
	}
	if c.frames != nil && n > 0 {
		if why := c.frames.feed(p[:n]); why != "" {
			c.l.floods.WithLabelValues(why).Inc()
			c.l.logs.Warn(c.peer, "closed a connection flooding the server with HTTP/2 frames", "flood", why)
			c.Close()
			return 0, errFrameFlood
		}
	}
	return n, err
}

// Close closes the connection and frees its slot; the socket of a shed
// connection is closed by shed.
func (c *peerConn) Close() error {
	if c.isShed.Load() {
		c.release()
		return nil
	}
	err := c.Conn.Close()
	c.release()
	return err
}

// release frees the connection's slot, once.
func (c *peerConn) release() {
	c.l.mu.Lock()
	first := !c.closed
	c.closed = true
	if c.elem != nil {
		c.l.waiting.Remove(c.elem)
		c.elem = nil
	}
	if first && c.countedDenied {
		if c.l.denied[c.deniedUID]--; c.l.denied[c.deniedUID] <= 0 {
			delete(c.l.denied, c.deniedUID)
		}
	}
	if first {
		// Freed under the lock that decided first: a shedOldest that
		// closes c while another goroutine is closing it too finds the
		// slot free when its own Close returns, so Accept never counts
		// one connection more than the limit.
		c.l.open.Add(-1)
	}
	c.l.mu.Unlock()
	if first {
		if c.stall != nil {
			c.stall.g.unwatch(c.stall)
		}
		if c.l.closed != nil {
			c.l.closed()
		}
	}
}

// startRequest marks the connection as busy for good: it has started a
// request, so it is no slowloris and is not shed.
func (c *peerConn) startRequest() {
	if c.started.CompareAndSwap(false, true) {
		c.l.setWaiting(c, false)
	}
}

type connKey struct{}

// connContext gives the requests of a connection its peer, and the
// connection itself.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if pc, ok := c.(*peerConn); ok {
		ctx = context.WithValue(ctx, connKey{}, pc)
		return guard.WithPeer(ctx, pc.peer)
	}
	return ctx
}

// connFrom returns the connection of a request's context, or nil.
func connFrom(ctx context.Context) *peerConn {
	pc, _ := ctx.Value(connKey{}).(*peerConn)
	return pc
}
