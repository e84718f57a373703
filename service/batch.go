package service

import "context"

// Batcher is what a watch asks of its transport: to hold back the flushes of
// the events it sends until Release, so that the events that are ready
// together reach the socket in one write. The server's transport puts one in
// the context of each watch (WithBatcher); without one, every event is
// flushed as connect sends it.
type Batcher interface {
	// Hold defers flushes until Release.
	Hold()
	// Release ends a hold and flushes what it held back.
	Release()
}

type batcherKey struct{}

// WithBatcher returns ctx carrying b, for the watch served with ctx.
func WithBatcher(ctx context.Context, b Batcher) context.Context {
	return context.WithValue(ctx, batcherKey{}, b)
}

// batcherFrom returns the Batcher of ctx, or one that does nothing.
func batcherFrom(ctx context.Context) Batcher {
	if b, ok := ctx.Value(batcherKey{}).(Batcher); ok {
		return b
	}
	return noBatcher{}
}

// noBatcher flushes every event as connect sends it.
type noBatcher struct{}

func (noBatcher) Hold()    {}
func (noBatcher) Release() {}

// EnvelopeWriter is what a watch asks of its transport to send a snapshot as
// a few large writes instead of one write per event: to write messages the
// watch has framed itself straight to the response body, without connect's
// copy. Each message is in the 5-byte envelope that gRPC, gRPC-Web and the
// Connect protocol's streams share: a flags byte of 0 (not compressed, not
// an end of stream), then the message's length as a big-endian uint32.
//
// The server's transport offers it, as a method of the Batcher it puts in
// the context (WithBatcher), only to watches whose messages travel as binary
// protobuf, which the watch then frames exactly as connect's codec would.
// The Pods handlers never compress a response (HandlerOptions), so connect
// frames every message so too. The watch sends its first event through
// connect, which writes the response headers with it and so knows that the
// body has begun: whatever ends the stream later, connect ends it with the
// protocol's trailers.
type EnvelopeWriter interface {
	// WriteEnvelopes writes b, whole enveloped messages, to the response
	// body, behind what connect has written.
	WriteEnvelopes(b []byte) error
}
