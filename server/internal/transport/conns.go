package transport

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/guard"
	"github.com/podsapi/podsapi/httpguard"
	"github.com/podsapi/podsapi/socket"
)

// The metrics of the API socket and of the metrics endpoint.
var (
	apiConnMetrics     = httpguard.MetricNames{Prefix: "podsapi", What: "the API socket", ConnFlag: "--max-connections", StallFlag: "--write-stall-timeout"}
	metricsConnMetrics = httpguard.MetricNames{Prefix: "podsapi_metrics", What: "the metrics endpoint", ConnFlag: "--metrics-max-connections"}
)

// peers reads the peer of each connection of the API socket as it is
// accepted, and refuses the connections of a peer that access denies
// beyond its share. The connections themselves, their bound and shedding,
// are httpguard's: a connection is shed until it has started a call
// (peerConn.startRequest), as a gRPC client keeps its connection between
// calls.
type peers struct {
	peerCred func(net.Conn) (socket.Cred, error)
	// cgroup reads a peer's cgroup file, which names it (guard.Peer.Client).
	cgroup func(ctx context.Context, pid int32) (string, error)
	floods *prometheus.CounterVec // nil: frames are not followed
	log    *slog.Logger
	logs   *guard.LogLimiter

	// A peer the access policy denies may keep deniedShare connections
	// (<= 0: any number): health, all it may call, needs one.
	denies      func(*guard.Peer) bool
	deniedShare int

	mu     sync.Mutex
	denied map[uint32]int // connections open by denied UID
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
func (p *peers) limitDenied(access *guard.AccessGuard, share int) {
	if access == nil || share <= 0 {
		return
	}
	p.denies = func(peer *guard.Peer) bool { return !access.Allows(peer) }
	p.deniedShare = share
	p.denied = make(map[uint32]int)
}

// wrap gives the accepted c its peer, or refuses it (httpguard.WithWrap).
func (p *peers) wrap(c *httpguard.Conn) (net.Conn, bool) {
	peer := &guard.Peer{}
	if cred, err := p.peerCred(c.NetConn()); err == nil {
		*peer = guard.Peer{Known: true, PID: cred.PID, UID: cred.UID, GID: cred.GID, Groups: cred.Groups, Cgroup: p.cgroup}
	} else {
		p.log.Debug("cannot read the peer credentials of a connection", "error", err)
	}
	if !p.admitDenied(c, peer) {
		p.logs.Warn(peer, "refused a connection: the client is not allowed to call the API and has too many connections open for health checks", "limit", p.deniedShare)
		return nil, false
	}
	c.SetPeer(peer)
	pc := &peerConn{Conn: c, guarded: c, peer: peer, l: p}
	if p.floods != nil {
		pc.frames = newFrameGuard()
	}
	return pc, true
}

// admitDenied counts c if its peer is denied, and reports whether it is
// within the share of its UID.
func (p *peers) admitDenied(c *httpguard.Conn, peer *guard.Peer) bool {
	if p.denies == nil || !p.denies(peer) {
		return true
	}
	uid := peerUID(peer)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.denied[uid] >= p.deniedShare {
		return false
	}
	p.denied[uid]++
	c.OnClose(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.denied[uid]--; p.denied[uid] <= 0 {
			delete(p.denied, uid)
		}
	})
	return true
}

// peerConn is an accepted connection of the API socket and its peer: it
// reads ahead, and follows the HTTP/2 frames it reads.
type peerConn struct {
	net.Conn                 // the guarded connection (in tests, any)
	guarded  *httpguard.Conn // nil in tests of the reads alone
	peer     *guard.Peer
	l        *peers
	// started is set by the first call (startRequest).
	started atomic.Bool
	// frames follows the HTTP/2 frames read, when not nil.
	frames *frameGuard
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

// NetConn returns the guarded connection below, for httpguard.ConnOf.
func (c *peerConn) NetConn() net.Conn { return c.Conn }

// startRequest marks the connection as busy for good: it has started a
// call, so it is no slowloris and is not shed (a gRPC client keeps its
// connection between calls).
func (c *peerConn) startRequest() {
	if c.guarded != nil && c.started.CompareAndSwap(false, true) {
		c.guarded.Hold() // released by the connection's close
	}
}

type connKey struct{}

// connContext gives the requests of a connection its peer, and the
// connection itself.
func connContext(ctx context.Context, c net.Conn) context.Context {
	ctx = httpguard.WithConn(ctx, c)
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
