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
