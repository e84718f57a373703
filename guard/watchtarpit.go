package guard

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/podsapi/podsapi/errinfo"
)

// watchTarpit delays the refusals of watches as rateLimit delays those of
// unary calls: a watch that ends with a refusal (INVALID_ARGUMENT,
// FAILED_PRECONDITION, RESOURCE_EXHAUSTED) before it sent a message waits
// the delay of the tarpit first, so that a client looping refused watches
// (an invalid field mask, before the sources synced, over its share of
// watches) makes one per delay and stream instead of thousands a second. A
// watch dropped for falling behind, or whose resume_from is too old
// (OUT_OF_RANGE), is answered at once: the client's recovery is to watch
// again now. Watches stay exempt from the rate limit of ListPods and GetPod.
type watchTarpit struct{ tarpit *Tarpit }

func (w watchTarpit) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc { return next }

func (w watchTarpit) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (w watchTarpit) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		c := &sentConn{StreamingHandlerConn: conn}
		err := next(ctx, c)
		if err != nil && !c.sent && refusal(err) {
			w.tarpit.Wait(ctx)
		}
		return err
	}
}

// refusal reports whether err refuses a watch for what its client asked or
// did, rather than ending one the client should start again at once.
func refusal(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition:
		return true
	case connect.CodeResourceExhausted:
		return reason(err) != errinfo.FellBehind
	}
	return false
}

// reason returns the reason of the ErrorInfo of err, an error the server
// built (errinfo.Reason reads those a client received).
func reason(err error) string {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return ""
	}
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if info, ok := v.(*errdetails.ErrorInfo); derr == nil && ok && info.GetDomain() == errinfo.Domain {
			return info.GetReason()
		}
	}
	return ""
}

// sentConn records whether a message was sent on its stream.
type sentConn struct {
	connect.StreamingHandlerConn
	sent bool
}

func (c *sentConn) Send(msg any) error {
	c.sent = true
	return c.StreamingHandlerConn.Send(msg)
}
