package service

import "context"

// Stream is what a watch asks of the transport that serves its response,
// beyond connect (WithStreams).
type Stream interface {
	// Hold defers the flushes of the events connect sends until Release,
	// so that the events that are ready together reach the socket in one
	// write.
	Hold()
	// Release ends a hold and flushes what it held back.
	Release()
	// WriteRaw writes b straight to the response body, behind what connect
	// has written, with the flushes held as they are. The watch writes
	// only whole messages it enveloped exactly as connect would
	// (envelope.go), and only after connect has sent the first message,
	// which writes the response headers: whatever ends the stream later,
	// connect ends it with the protocol's trailers.
	WriteRaw(b []byte) error
}

// stream returns the Stream of the watch served with ctx, or one that holds
// nothing and writes nothing raw.
func (h *handler) stream(ctx context.Context) (s Stream, raw bool) {
	if h.streams != nil {
		if s := h.streams(ctx); s != nil {
			return s, true
		}
	}
	return noStream{}, false
}

// noStream flushes every event as connect sends it.
type noStream struct{}

func (noStream) Hold()                   {}
func (noStream) Release()                {}
func (noStream) WriteRaw(b []byte) error { return errWrite }
