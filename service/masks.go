package service

import (
	"context"
	"net/http"
	"strings"

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
//
// Responses are never compressed (envelopeOptions): the watches envelope
// their shared snapshots themselves, as connect does without compression.
func HandlerOptions(interceptors ...connect.Interceptor) []connect.HandlerOption {
	return append([]connect.HandlerOption{
		connect.WithInterceptors(interceptors...),
		connect.WithCodec(jsonCodec{"json"}),
		connect.WithCodec(jsonCodec{"json; charset=utf-8"}),
		connect.WithReadMaxBytes(MaxRequestBytes),
	}, envelopeOptions()...)
}

// FieldMasks returns the interceptor that parses and validates the field
// mask of a request's metadata once per request or stream, and hands it to
// the handlers; without it every response carries whole pods. The masks of
// the last 128 distinct headers stay parsed, shared by the calls that send
// them again.
func FieldMasks() connect.Interceptor { return fieldMask{newMaskCache()} }

// fieldMask is the interceptor of FieldMasks.
type fieldMask struct{ masks maskCache }

type maskKey struct{}

// parse returns the mask of the field mask headers of h.
func (f fieldMask) parse(h http.Header) (*fieldmask.Mask, error) {
	texts, bins := h.Values(fieldmask.Header), h.Values(fieldmask.BinaryHeader)
	if len(texts) == 0 && len(bins) == 0 {
		return nil, nil
	}
	// NUL separates the values (it cannot be in one) and SOH the headers.
	key := strings.Join(texts, "\x00") + "\x01" + strings.Join(bins, "\x00")
	mask, err := get(f.masks, key, func() (*fieldmask.Mask, error) { return fieldmask.FromHeader(h) })
	if err != nil {
		return nil, errFieldMask(err)
	}
	return mask, nil
}

func (f fieldMask) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		mask, err := f.parse(req.Header())
		if err != nil {
			return nil, err
		}
		return next(context.WithValue(ctx, maskKey{}, mask), req)
	}
}

func (fieldMask) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (f fieldMask) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		mask, err := f.parse(conn.RequestHeader())
		if err != nil {
			return err
		}
		return next(context.WithValue(ctx, maskKey{}, mask), conn)
	}
}

// maskFrom returns the request's field mask; nil means the whole pod.
func maskFrom(ctx context.Context) *fieldmask.Mask {
	mask, _ := ctx.Value(maskKey{}).(*fieldmask.Mask)
	return mask
}
