package guard

import (
	"context"

	"connectrpc.com/connect"

	"github.com/podsapi/podsapi/internal/admit"
)

// Limiter decides whether a request may proceed now. *rate.Limiter from
// golang.org/x/time/rate implements it.
type Limiter interface {
	// Allow reports whether a request may happen now, taking a token if so.
	Allow() bool
}

// Named is an interceptor with a name, by which an assembly (or a test that
// plants a fault) finds it in a chain; never by its index.
type Named struct {
	Name string
	connect.Interceptor
}

// The names of the guards' interceptors, in the order Chain returns them.
const (
	NameWatchTarpit     = "watch-tarpit"
	NameReadiness       = "readiness"
	NameClientRateLimit = "client-rate-limit"
	NameRateLimit       = "rate-limit"
	NameWatchLimit      = "watch-limit"
)

// Guards are what the interceptors of the Pods handlers check. Nil fields
// check nothing.
type Guards struct {
	// Ready reports whether the pod sources have synced.
	Ready func() bool
	// PerClient is the rate limit of each client (Peer.Client), applied
	// before the shared Limiter so that a client over its own limit does
	// not spend the shared bucket. Peers without credentials share one
	// client.
	PerClient *admit.KeyedLimiter
	// Limiter is the rate limit shared by ListPods and GetPod of both
	// wires.
	Limiter Limiter
	// Tarpit delays the answers to calls refused by PerClient or Limiter,
	// and those of watches refused before their first message.
	Tarpit *Tarpit
	// Watches bounds the watches open at once, and each client's share.
	Watches *admit.Slots
}

// Chain returns the interceptors of g, outermost first: the tarpit of
// refused watches (which also delays the refusals of the interceptors after
// the chain, such as an invalid field mask), readiness (FAILED_PRECONDITION until the sources have
// synced), the per-client and then the shared rate limit on unary calls
// (RESOURCE_EXHAUSTED after the delay of the tarpit; WatchPods is exempt) and
// the limit of open watches (RESOURCE_EXHAUSTED).
func Chain(g Guards) []Named {
	var is []Named
	if g.Tarpit != nil {
		is = append(is, Named{NameWatchTarpit, watchTarpit{g.Tarpit}})
	}
	if g.Ready != nil {
		is = append(is, Named{NameReadiness, readiness(g.Ready)})
	}
	if g.PerClient != nil {
		is = append(is, Named{NameClientRateLimit, rateLimit(g.Tarpit, errClientRateLimited,
			func(ctx context.Context) bool { return g.PerClient.Allow(PeerFrom(ctx).Client(ctx)) })})
	}
	if g.Limiter != nil {
		is = append(is, Named{NameRateLimit, rateLimit(g.Tarpit, errRateLimited,
			func(context.Context) bool { return g.Limiter.Allow() })})
	}
	if g.Watches != nil {
		is = append(is, Named{NameWatchLimit, watchLimit{g.Watches}})
	}
	return is
}

// watchLimit refuses a watch beyond the limit of open watches, or beyond
// its client's share of them.
type watchLimit struct{ slots *admit.Slots }

func (w watchLimit) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc { return next }

func (w watchLimit) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (w watchLimit) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		p := PeerFrom(ctx)
		client := p.Client(ctx)
		release, err := w.slots.Acquire(client)
		if err != nil {
			return errWatchSlots(err, p)
		}
		defer release()
		return next(ctx, conn)
	}
}

// readiness rejects every call until the pod sources have synced.
type readiness func() bool

func (r readiness) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if !r() {
			return nil, errNotSynced
		}
		return next(ctx, req)
	}
}

func (r readiness) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (r readiness) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if !r() {
			return errNotSynced
		}
		return next(ctx, conn)
	}
}

// rateLimit refuses the unary calls that allow does not let through, with
// refuse, after the delay of tarpit; streams are not rate limited.
func rateLimit(tarpit *Tarpit, refuse func(procedure string) error, allow func(context.Context) bool) connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if err := ctx.Err(); err != nil {
				// The client reset the call (or gave up) before it was
				// answered: it does not spend a token others could use.
				return nil, err
			}
			if !allow(ctx) {
				tarpit.Wait(ctx)
				return nil, refuse(req.Spec().Procedure)
			}
			return next(ctx, req)
		}
	}
}
