package guard

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/internal/loglimit"
)

// Peer is the client process at the other end of a connection, as the
// kernel described it when the connection was accepted (SO_PEERCRED).
type Peer struct {
	// Known is false when the connection told nothing about its peer (not
	// a UNIX socket, or the kernel refused): such a peer is denied whenever
	// access is restricted.
	Known  bool
	PID    int32
	UID    uint32
	GID    uint32
	Groups []uint32 // supplementary groups, when the kernel tells them
	// Cgroup reads the cgroup file (/proc/PID/cgroup) of the process PID,
	// which Client names the peer by; nil names it by its UID.
	Cgroup func(ctx context.Context, pid int32) (string, error)

	clientMu sync.Mutex
	client   string // "" until Client has named the peer
}

type peerKey struct{}

// WithPeer returns ctx carrying p, the peer of the request's connection.
// The server sets it for every connection (http.Server.ConnContext).
func WithPeer(ctx context.Context, p *Peer) context.Context {
	return context.WithValue(ctx, peerKey{}, p)
}

// PeerFrom returns the peer of the request of ctx, or nil.
func PeerFrom(ctx context.Context) *Peer {
	p, _ := ctx.Value(peerKey{}).(*Peer)
	return p
}

// logAttrs returns the attributes that name p in logs.
func (p *Peer) logAttrs() []any {
	if p == nil || !p.Known {
		return []any{"peer", "unknown"}
	}
	return []any{"uid", p.UID, "gid", p.GID, "pid", p.PID}
}

// AccessPolicy says which peers may call the API: those whose UID is in
// UIDs, or whose effective or supplementary group is in GIDs. AnyPeer turns
// the check off (file permissions alone then decide).
type AccessPolicy struct {
	AnyPeer bool
	UIDs    []uint32
	GIDs    []uint32
}

// Allows reports whether p may call the API.
func (a *AccessPolicy) Allows(p *Peer) bool {
	if a == nil || a.AnyPeer {
		return true
	}
	if p == nil || !p.Known {
		return false
	}
	if slices.Contains(a.UIDs, p.UID) || slices.Contains(a.GIDs, p.GID) {
		return true
	}
	for _, g := range p.Groups {
		if slices.Contains(a.GIDs, g) {
			return true
		}
	}
	return false
}

// AccessGuard denies the calls of the peers an AccessPolicy does not allow.
// Every denied call is counted (podsapi_peer_denied_total); the denials are
// logged with the peer's uid, gid and pid, at most one line per
// UID every PeerLogInterval, with the number of denials left unlogged.
// Check serves the HTTP middleware that refuses before a request's body is
// read (the server's transport): it is the one access check, in front of
// every service but health.
type AccessGuard struct {
	policy *AccessPolicy
	denied prometheus.Counter
	logger *slog.Logger
	logs   *LogLimiter
}

// PeerLogInterval is how often the same warning about peers of one UID is
// logged at most: denials, floods, stalled streams.
const PeerLogInterval = 10 * time.Second

// NewAccessGuard returns the guard of policy, which registers its counter
// of denied calls with reg (nil registers it nowhere); a nil logger means
// slog.Default().
func NewAccessGuard(policy *AccessPolicy, reg prometheus.Registerer, logger *slog.Logger) *AccessGuard {
	if logger == nil {
		logger = slog.Default()
	}
	denied := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "podsapi_peer_denied_total",
		Help: "Number of calls refused with PERMISSION_DENIED because the peer's uid and gids are not allowed (--allowed-uids, --allowed-gids).",
	})
	if reg != nil {
		reg.MustRegister(denied)
	}
	return &AccessGuard{policy: policy, denied: denied, logger: logger, logs: NewLogLimiter(logger, PeerLogInterval)}
}

// Allows reports whether the policy allows p, without counting or logging
// anything.
func (a *AccessGuard) Allows(p *Peer) bool { return a.policy.Allows(p) }

// Check returns the PERMISSION_DENIED error that refuses the call of
// procedure by the peer of ctx, or nil when the peer is allowed.
func (a *AccessGuard) Check(ctx context.Context, procedure string) error {
	p := PeerFrom(ctx)
	if a.policy.Allows(p) {
		return nil
	}
	a.denied.Inc()
	a.logs.Warn(p, "denied a client not allowed by the access policy", "procedure", procedure)
	return errPermissionDenied(p)
}

// LogLimiter writes WARN lines about peers at most once per interval for
// each peer UID and message, so that a hostile peer cannot fill the logs:
// the lines it suppresses are counted and reported, as suppressed=N, by the
// next line written for the same UID and message. It remembers at most
// loglimit.MaxKeys (UID, message) pairs.
type LogLimiter struct {
	logger *slog.Logger
	limit  *loglimit.Limiter[logKey]
}

type logKey struct {
	uid uint32
	msg string
}

// NewLogLimiter returns a limiter writing to logger at most one line per
// peer UID and message every interval.
func NewLogLimiter(logger *slog.Logger, interval time.Duration) *LogLimiter {
	return &LogLimiter{logger: logger, limit: loglimit.New[logKey](interval)}
}

// Warn logs msg about peer p with args at WARN level, unless a line with
// the same message was logged for p's UID less than the interval ago.
func (l *LogLimiter) Warn(p *Peer, msg string, args ...any) {
	ok, suppressed := l.limit.Allow(logKey{uid: peerUID(p), msg: msg})
	if !ok {
		return
	}
	attrs := append(p.logAttrs(), args...)
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	l.logger.Warn(msg, attrs...)
}

// peerUID returns the UID p is counted under: peers without credentials
// share the UID 1<<32-1.
func peerUID(p *Peer) uint32 {
	if p != nil && p.Known {
		return p.UID
	}
	return ^uint32(0)
}
