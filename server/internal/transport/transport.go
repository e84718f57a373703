// Package transport is the HTTP/2 transport of the API socket, below
// connect: the connections (httpguard's bound, shedding and stall guard,
// shared with the Kubernetes API's door, and the socket's own: each peer's
// credentials, the denied peers' share, HTTP/2 frame floods), and, in
// front of every handler, the
// gate (the one access check, request deadlines, calls pending per UID) and
// the streams whose flushes a watch may hold and whose bodies it may write
// to itself.
//
// Its surface is one Config, New, and the Transport's Listen (the
// connections), Server (the HTTP/1.1 and h2c server of a handler, behind
// the transport), Run (the stall reaper) and Stream (the response stream of
// a watch, which the service reaches through its typed option
// service.WithStreams). ListenMetrics serves the metrics endpoint, its
// connections bounded alike.
package transport

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/guard"
	"github.com/podsapi/podsapi/httpguard"
	"github.com/podsapi/podsapi/socket"
)

// Config configures a Transport. Zero or negative limits are off.
type Config struct {
	// MaxConnections bounds the open connections: a new one takes the
	// slot of the oldest that has not started a request, or is closed as
	// soon as accepted.
	MaxConnections int
	// MaxDeniedConnections is how many connections a peer that Access
	// denies may keep open.
	MaxDeniedConnections int
	// Access is the one access check of the socket: it refuses the calls
	// of denied peers to every service but health before their body is
	// read. Nil allows every peer.
	Access *guard.AccessGuard
	// RequestReadTimeout is how long a call may take to send its request
	// (for reflection, its first message) before it ends with
	// DEADLINE_EXCEEDED.
	RequestReadTimeout time.Duration
	// MaxPendingPerClient bounds the calls of one client (guard.Peer.Client) waiting for their
	// request at once.
	MaxPendingPerClient int
	// WriteStallTimeout is how long a write to a client may stay blocked
	// before its stream is reset, or its connection closed.
	WriteStallTimeout time.Duration
	// MaxStreams is the number of concurrent HTTP/2 streams per
	// connection; 0 is net/http's default.
	MaxStreams int
	// IdleTimeout closes a connection without open calls after that long.
	IdleTimeout time.Duration
	// KeepaliveInterval is how long a connection may stay silent before
	// it is pinged; a peer that does not answer within KeepaliveTimeout
	// is closed.
	KeepaliveInterval time.Duration
	KeepaliveTimeout  time.Duration
	// Streams are the procedures (URL paths) whose response is a Stream
	// (Transport.Stream): its flushes may be held, its body written to.
	Streams []string
	// PeerCred reads the credentials of an accepted connection's peer.
	// Default socket.PeerCred (SO_PEERCRED); tests give the peer they
	// want to be.
	PeerCred func(net.Conn) (socket.Cred, error)
	// Cgroup reads the cgroup file of a peer's process, by which the
	// per-client shares tell apart the clients of one UID
	// (guard.Peer.Client); nil tells them apart by UID alone.
	Cgroup func(ctx context.Context, pid int32) (string, error)
	// ConnAccepted, if set, is called when a connection is accepted and
	// counted, ConnClosed when it is closed and its slot freed: events a
	// test waits on.
	ConnAccepted func()
	ConnClosed   func()
	// Registry receives the transport's metrics; Logger its logs. Both
	// required.
	Registry prometheus.Registerer
	Logger   *slog.Logger
}

// Transport is the transport of one API socket.
type Transport struct {
	cfg   Config
	gate  *gate
	stall *httpguard.StallGuard // nil: writes are not followed
}

// New returns the transport of cfg, registering its metrics.
func New(cfg Config) *Transport {
	if cfg.PeerCred == nil {
		cfg.PeerCred = socket.PeerCred
	}
	t := &Transport{cfg: cfg}
	t.gate = newGate(cfg.Access, cfg.RequestReadTimeout, cfg.MaxPendingPerClient, cfg.Registry)
	if cfg.WriteStallTimeout > 0 {
		t.stall = httpguard.NewStallGuard(cfg.WriteStallTimeout, apiConnMetrics, cfg.Registry, cfg.Logger)
	}
	return t
}

// Listen returns l with its connections bounded, carrying their peer,
// followed for frame floods and stalled writes.
func (t *Transport) Listen(l net.Listener) net.Listener {
	p := &peers{
		peerCred: t.cfg.PeerCred,
		cgroup:   t.cfg.Cgroup,
		floods:   newFloodCounter(t.cfg.Registry),
		log:      t.cfg.Logger,
		logs:     guard.NewLogLimiter(t.cfg.Logger, guard.PeerLogInterval),
	}
	p.limitDenied(t.cfg.Access, t.cfg.MaxDeniedConnections)
	opts := []httpguard.ListenerOption{httpguard.WithWrap(p.wrap), httpguard.WithEvents(t.cfg.ConnAccepted, t.cfg.ConnClosed)}
	if t.stall != nil {
		opts = append(opts, httpguard.WithStallGuard(t.stall))
	}
	return httpguard.NewListener(l, t.cfg.MaxConnections, httpguard.NewConnMetrics(apiConnMetrics, t.cfg.Registry), apiConnMetrics.What, t.cfg.Logger, opts...)
}

// Server returns the HTTP/1.1 and h2c server of h, behind the transport:
// outermost first the stall guard, the gate, and the Streams of the
// procedures of Config.Streams. It serves the listeners of Listen.
func (t *Transport) Server(h http.Handler) *http.Server {
	cfg := t.cfg
	t.gate.next = t.streams(h)
	var handler http.Handler = t.gate
	if t.stall != nil {
		handler = t.stall.Wrap(handler)
	}
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Server{
		Handler:           handler,
		Protocols:         protocols,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		IdleTimeout:       max(cfg.IdleTimeout, 0),
		ConnContext:       connContext,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams:      cfg.MaxStreams,
			MaxDecoderHeaderTableSize: 16 << 10,
			// The windows and frames a client may send are sized for
			// requests of a few KiB, not net/http's 1 MiB defaults: a
			// connection buffers at most 64 KiB that no handler has
			// read yet.
			MaxReceiveBufferPerConnection: receiveWindowPerConnection,
			MaxReceiveBufferPerStream:     receiveWindowPerStream,
			MaxReadFrameSize:              maxReadFrameSize,
			SendPingTimeout:               max(cfg.KeepaliveInterval, 0),
			PingTimeout:                   cfg.KeepaliveTimeout,
			// No WriteByteTimeout: it arms a timer around every write to
			// the socket; the stall guard closes a connection whose
			// writes stay blocked (httpguard.StallGuard).
		},
		ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
	}
}

// The HTTP/2 settings the server advertises for what clients send: the
// protocol's initial windows (RFC 9113, 6.9.2) and its smallest largest
// frame (4.2). A stream's window is not set below the initial one: a client
// may send up to the initial window before it has read the server's
// SETTINGS, and net/http would reset its stream with FLOW_CONTROL_ERROR.
const (
	receiveWindowPerConnection = 65535
	receiveWindowPerStream     = 65535
	maxReadFrameSize           = 16 << 10
)

// streams gives the requests of the procedures of Config.Streams their
// Stream, in their context.
func (t *Transport) streams(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(t.cfg.Streams, r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		s := newStream(w)
		next.ServeHTTP(s, r.WithContext(context.WithValue(r.Context(), streamKey{}, s)))
	})
}

// Run runs the stall reaper until stop is closed.
func (t *Transport) Run(stop <-chan struct{}) {
	if t.stall != nil {
		t.stall.Run(stop)
	}
}

type streamKey struct{}

// Stream returns the response stream of the call served with ctx, or nil
// when its procedure is not one of Config.Streams.
func (t *Transport) Stream(ctx context.Context) *Stream {
	s, _ := ctx.Value(streamKey{}).(*Stream)
	return s
}
