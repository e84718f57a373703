package service

import (
	"context"
	"log/slog"
	"math"

	"connectrpc.com/connect"

	"github.com/podsapi/podsapi/fieldmask"
)

// Limiter decides whether a request may proceed now. *rate.Limiter from
// golang.org/x/time/rate implements it.
type Limiter interface {
	// Allow reports whether a request may happen now, taking a token if so.
	Allow() bool
}

// MaxRequestBytes is the largest request message the Pods API accepts. Its
// requests are tiny; anything larger is refused with RESOURCE_EXHAUSTED.
const MaxRequestBytes = 4 << 10

// Guards are what the interceptors of the Pods handler check, besides
// counting requests in Metrics. Nil fields check nothing.
type Guards struct {
	Metrics *Metrics
	// Ready reports whether the pod sources have synced.
	Ready func() bool
	// Access says which peers may call; Logger receives its denials.
	Access *AccessPolicy
	Logger *slog.Logger
	// PerClient is the rate limit of each peer UID, applied before the
	// shared Limiter so that a client over its own limit does not spend the
	// shared bucket.
	PerClient *PerClientLimiter
	// Limiter is the rate limit shared by ListPods and GetPod.
	Limiter Limiter
	// Tarpit delays the answers to calls refused by PerClient or Limiter.
	Tarpit *Tarpit
	// Watches bounds the watches open at once.
	Watches *WatchLimit
}

// HandlerOptions returns the connect options of the Pods handler: the
// interceptors of Interceptors for g, JSON codecs that understand the
// handler's responses, and the MaxRequestBytes limit.
func HandlerOptions(g Guards) []connect.HandlerOption {
	return []connect.HandlerOption{
		connect.WithInterceptors(Interceptors(g)...),
		connect.WithCodec(jsonCodec{"json"}),
		connect.WithCodec(jsonCodec{"json; charset=utf-8"}),
		connect.WithReadMaxBytes(MaxRequestBytes),
		// Responses are never compressed: on a UNIX socket compression only
		// costs CPU (a flate writer reset per message, per watcher), and
		// connect-go clients ask for gzip by default. Compressed requests
		// are still accepted.
		connect.WithCompressMinBytes(math.MaxInt32),
	}
}

// Interceptors returns the interceptors of the Pods handler for the guards
// of g, outermost first: metrics (every request counted, rejected ones
// included), access (PERMISSION_DENIED), readiness (FAILED_PRECONDITION until
// the sources have synced), the per-client and then the shared rate limit on
// unary calls (RESOURCE_EXHAUSTED after the delay of the tarpit; WatchPods is
// exempt), the limit of open watches (RESOURCE_EXHAUSTED) and the field
// mask, parsed and validated once per request or stream.
func Interceptors(g Guards) []connect.Interceptor {
	var is []connect.Interceptor
	if g.Metrics != nil {
		is = append(is, g.Metrics)
	}
	if g.Access != nil && !g.Access.AnyPeer {
		is = append(is, AccessInterceptor(g.Access, g.Metrics, g.Logger))
	}
	if g.Ready != nil {
		is = append(is, readiness(g.Ready))
	}
	if g.PerClient != nil {
		is = append(is, clientRateLimit(g.PerClient, g.Tarpit))
	}
	is = append(is, sharedRateLimit(g.Limiter, g.Tarpit))
	if g.Watches != nil {
		is = append(is, watchLimit{g.Watches})
	}
	return append(is, fieldMask{})
}

// watchLimit refuses a watch beyond the limit of open watches.
type watchLimit struct{ limit *WatchLimit }

func (w watchLimit) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc { return next }

func (w watchLimit) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (w watchLimit) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		p := PeerFrom(ctx)
		if err := w.limit.acquire(p); err != nil {
			return err
		}
		defer w.limit.release(p)
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
type rateLimit struct {
	allow  func(context.Context) bool
	refuse func(procedure string) error
	tarpit *Tarpit
}

// sharedRateLimit applies a Limiter (none when nil) to unary calls.
func sharedRateLimit(limiter Limiter, tarpit *Tarpit) rateLimit {
	return rateLimit{
		allow:  func(context.Context) bool { return limiter == nil || limiter.Allow() },
		refuse: errRateLimited,
		tarpit: tarpit,
	}
}

// clientRateLimit applies a PerClientLimiter to unary calls, keyed by the
// peer of the call.
func clientRateLimit(limiter *PerClientLimiter, tarpit *Tarpit) rateLimit {
	return rateLimit{
		allow:  func(ctx context.Context) bool { return limiter.Allow(PeerFrom(ctx)) },
		refuse: errClientRateLimited,
		tarpit: tarpit,
	}
}

func (l rateLimit) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if err := ctx.Err(); err != nil {
			// The client reset the call (or gave up) before it was
			// answered: it does not spend a token others could use.
			return nil, err
		}
		if !l.allow(ctx) {
			l.tarpit.Wait(ctx)
			return nil, l.refuse(req.Spec().Procedure)
		}
		return next(ctx, req)
	}
}

func (l rateLimit) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (l rateLimit) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// fieldMask parses the field mask of the request metadata once and hands it
// to the handler through the context.
type fieldMask struct{}

type maskKey struct{}

func (fieldMask) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		mask, err := fieldmask.FromHeader(req.Header())
		if err != nil {
			return nil, errFieldMask(err)
		}
		return next(context.WithValue(ctx, maskKey{}, mask), req)
	}
}

func (fieldMask) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (fieldMask) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		mask, err := fieldmask.FromHeader(conn.RequestHeader())
		if err != nil {
			return errFieldMask(err)
		}
		return next(context.WithValue(ctx, maskKey{}, mask), conn)
	}
}

// maskFrom returns the request's field mask; nil means the whole pod.
func maskFrom(ctx context.Context) *fieldmask.Mask {
	mask, _ := ctx.Value(maskKey{}).(*fieldmask.Mask)
	return mask
}
