package service

import (
	"context"
	"math"

	"connectrpc.com/connect"

	"github.com/podsapi/podsapi/fieldmask"
)

// MaxRequestBytes is the largest request message the Pods API accepts. Its
// requests are tiny; anything larger is refused with RESOURCE_EXHAUSTED.
const MaxRequestBytes = 4 << 10

// HandlerOptions returns the connect options of the Pods handlers of both
// wires: interceptors, outermost first, JSON codecs that understand the
// handlers' responses, and the MaxRequestBytes limit. The interceptors must
// end with FieldMasks, which hands the handlers their masks.
func HandlerOptions(interceptors ...connect.Interceptor) []connect.HandlerOption {
	return []connect.HandlerOption{
		connect.WithInterceptors(interceptors...),
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

// FieldMasks returns the interceptor that parses and validates the field
// mask of a request's metadata once per request or stream, and hands it to
// the handlers; without it every response carries whole pods.
func FieldMasks() connect.Interceptor { return fieldMask{} }

// fieldMask is the interceptor of FieldMasks.
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
