package kubeapi

import "net/http"

// WatchEnd is why a watch of the node's pods ended (WithWatchEnded).
type WatchEnd string

// The ends of a watch. WatchTimedOut, WatchCancelled and WatchExpired are
// the ordinary ends of a watch, which client-go resumes or relists after;
// WatchStalled, WatchFellBehind and WatchFailed are ends the handler chose
// for another reason, each costing the client a new watch.
const (
	// WatchTimedOut: the watch lasted its timeoutSeconds (capped by
	// WithWatchTimeout).
	WatchTimedOut WatchEnd = "timeout"
	// WatchCancelled: the client went, or the server is shutting down.
	WatchCancelled WatchEnd = "cancelled"
	// WatchExpired: the resourceVersion asked is no longer held (an ERROR
	// event 410 Expired, after which client-go lists again).
	WatchExpired WatchEnd = "expired"
	// WatchStalled: a write did not complete within WithWriteTimeout (a
	// client that stopped reading).
	WatchStalled WatchEnd = "stalled"
	// WatchFellBehind: the watch had more changes waiting than
	// WithWatchQueue.
	WatchFellBehind WatchEnd = "behind"
	// WatchFailed: an event could not be encoded, or a write failed
	// otherwise.
	WatchFailed WatchEnd = "failed"
)

// WithWatchEnded sets a function called when each watch of the node's
// pods ends, with its request and why it ended, for a server's logs and
// metrics (the door counts and logs them). It is called on the watch's
// goroutine before the response's end is written, and must not block. By
// default none is called.
func WithWatchEnded(f func(r *http.Request, end WatchEnd)) Option {
	return func(h *Handler) { h.watchEnded = f }
}
