package server

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/service"
	"github.com/podsapi/podsapi/socket"
)

// rejectLogInterval bounds how often refused connections are logged.
const rejectLogInterval = 10 * time.Second

// connListener accepts the connections of the API socket: it reads each
// peer's credentials when the connection is accepted, and closes at once the
// connections beyond max open ones (max <= 0: no limit).
type connListener struct {
	net.Listener
	max      int64
	open     atomic.Int64
	rejected prometheus.Counter
	log      *slog.Logger

	mu         sync.Mutex
	lastLog    time.Time
	unreported int
}

func newConnListener(l net.Listener, max int, reg prometheus.Registerer, log *slog.Logger) *connListener {
	cl := &connListener{
		Listener: l,
		max:      int64(max),
		log:      log,
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "podsapi_connections_rejected_total",
			Help: "Number of connections closed as soon as accepted because --max-connections were open.",
		}),
	}
	reg.MustRegister(cl.rejected, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "podsapi_connections_open",
		Help: "Number of connections open on the API socket.",
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
		if n := l.open.Add(1); l.max > 0 && n > l.max {
			l.open.Add(-1)
			c.Close()
			l.rejected.Inc()
			l.logRejected()
			continue
		}
		p := &service.Peer{}
		if cred, err := socket.PeerCred(c); err == nil {
			*p = service.Peer{Known: true, PID: cred.PID, UID: cred.UID, GID: cred.GID, Groups: cred.Groups}
		} else {
			l.log.Debug("cannot read the peer credentials of a connection", "error", err)
		}
		return &peerConn{Conn: c, peer: p, l: l}, nil
	}
}

// logRejected logs refused connections, at most once per rejectLogInterval.
func (l *connListener) logRejected() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unreported++
	if now := time.Now(); now.Sub(l.lastLog) >= rejectLogInterval {
		l.log.Warn("refused connections: --max-connections are open", "refused", l.unreported, "limit", l.max)
		l.lastLog, l.unreported = now, 0
	}
}

// peerConn is an accepted connection and its peer.
type peerConn struct {
	net.Conn
	peer *service.Peer
	l    *connListener
	once sync.Once
}

// Close closes the connection and frees its slot.
func (c *peerConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}

// connContext gives the requests of a connection its peer.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if pc, ok := c.(*peerConn); ok {
		return service.WithPeer(ctx, pc.peer)
	}
	return ctx
}
