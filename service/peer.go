package service

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"connectrpc.com/connect"
	"golang.org/x/time/rate"
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

	denyLogged atomic.Bool
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

// AccessInterceptor returns the interceptor that answers PERMISSION_DENIED
// to every call of a peer policy does not allow. The first denial of each
// connection is logged with the peer's uid, gid and pid; every denied call
// is counted in metrics (which may be nil).
func AccessInterceptor(policy *AccessPolicy, metrics *Metrics, logger *slog.Logger) connect.Interceptor {
	if logger == nil {
		logger = slog.Default()
	}
	return &access{policy: policy, metrics: metrics, logger: logger}
}

type access struct {
	policy  *AccessPolicy
	metrics *Metrics
	logger  *slog.Logger
}

// check returns the error that denies the call of ctx, or nil.
func (a *access) check(ctx context.Context, procedure string) error {
	p := PeerFrom(ctx)
	if a.policy.Allows(p) {
		return nil
	}
	a.metrics.peerDenied()
	if p == nil || p.denyLogged.CompareAndSwap(false, true) {
		a.logger.Warn("denied a client not allowed by --allowed-uids or --allowed-gids",
			append(p.logAttrs(), "procedure", procedure)...)
	}
	return errPermissionDenied(p)
}

func (a *access) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if err := a.check(ctx, req.Spec().Procedure); err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

func (a *access) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (a *access) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if err := a.check(ctx, conn.Spec().Procedure); err != nil {
			return err
		}
		return next(ctx, conn)
	}
}

// maxClientLimiters bounds the per-client limiters kept; beyond it, those
// with a full bucket (indistinguishable from new ones) are forgotten.
const maxClientLimiters = 1024

// PerClientLimiter keeps one token bucket per peer UID.
type PerClientLimiter struct {
	qps   rate.Limit
	burst int

	mu       sync.Mutex
	limiters map[uint32]*rate.Limiter
}

// NewPerClientLimiter returns per-UID buckets of qps and burst.
func NewPerClientLimiter(qps float64, burst int) *PerClientLimiter {
	return &PerClientLimiter{qps: rate.Limit(qps), burst: burst, limiters: make(map[uint32]*rate.Limiter)}
}

// Allow reports whether the peer p may make a request now, taking a token
// of its bucket if so. Peers without credentials share the bucket of the
// UID 1<<32-1 (the kernel's overflow UID is 65534, so none collides).
func (l *PerClientLimiter) Allow(p *Peer) bool {
	uid := ^uint32(0)
	if p != nil && p.Known {
		uid = p.UID
	}
	l.mu.Lock()
	lim, ok := l.limiters[uid]
	if !ok {
		if len(l.limiters) >= maxClientLimiters {
			for k, v := range l.limiters {
				if v.Tokens() >= float64(l.burst) {
					delete(l.limiters, k)
				}
			}
		}
		lim = rate.NewLimiter(l.qps, l.burst)
		l.limiters[uid] = lim
	}
	l.mu.Unlock()
	return lim.Allow()
}

// WatchLimit bounds the number of watches open at once on a server.
type WatchLimit struct {
	max  int64
	open atomic.Int64
}

// NewWatchLimit returns a limit of max open watches; max <= 0 means none.
func NewWatchLimit(max int) *WatchLimit {
	return &WatchLimit{max: int64(max)}
}

// Open returns the number of watches open now.
func (w *WatchLimit) Open() int64 {
	if w == nil {
		return 0
	}
	return w.open.Load()
}

// acquire takes a slot, reporting false when the limit is reached.
func (w *WatchLimit) acquire() bool {
	if w == nil {
		return true
	}
	if n := w.open.Add(1); w.max > 0 && n > w.max {
		w.open.Add(-1)
		return false
	}
	return true
}

func (w *WatchLimit) release() {
	if w != nil {
		w.open.Add(-1)
	}
}
