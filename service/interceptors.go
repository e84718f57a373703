package service

import (
	"context"

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

// HandlerOptions returns the connect options of the Pods handler: the
// interceptors of Interceptors, JSON codecs that understand the handler's
// responses, and the MaxRequestBytes limit.
func HandlerOptions(metrics *Metrics, ready func() bool, limiter Limiter) []connect.HandlerOption {
	return []connect.HandlerOption{
		connect.WithInterceptors(Interceptors(metrics, ready, limiter)...),
		connect.WithCodec(jsonCodec{"json"}),
		connect.WithCodec(jsonCodec{"json; charset=utf-8"}),
		connect.WithReadMaxBytes(MaxRequestBytes),
	}
}

// Interceptors returns the interceptors of the Pods handler, outermost first:
// metrics (every request counted, rejected ones included), readiness
// (FAILED_PRECONDITION until ready reports true), the rate limit on unary
// calls (RESOURCE_EXHAUSTED when limiter refuses; WatchPods is exempt) and the
// field mask, parsed and validated once per request or stream.
func Interceptors(metrics *Metrics, ready func() bool, limiter Limiter) []connect.Interceptor {
	return []connect.Interceptor{
		metrics,
		readiness(ready),
		rateLimit{limiter},
		fieldMask{},
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

// rateLimit applies a Limiter to unary calls; streams are not rate limited.
type rateLimit struct{ limiter Limiter }

func (l rateLimit) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if l.limiter != nil && !l.limiter.Allow() {
			return nil, errRateLimited(req.Spec().Procedure)
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
