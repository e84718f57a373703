package server

import (
	"net/http"

	"github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/gen/v1alpha1/v1alpha1connect"
	"github.com/podsapi/podsapi/service"
)

// batchWatchFlushes wraps the Pods handlers, of either wire, so that
// WatchPods can write the events a watcher has queued with one flush instead
// of one per event: connect flushes after every message it sends, which costs
// a write to the socket per event when a watcher has several events waiting.
// The watch holds and releases the flushes through service.Batcher. Other
// procedures pass through untouched.
func batchWatchFlushes(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != podsv1alpha1connect.PodsWatchPodsProcedure && r.URL.Path != v1alpha1connect.PodsWatchPodsProcedure {
			next.ServeHTTP(w, r)
			return
		}
		b := &batchWriter{ResponseWriter: w, rc: http.NewResponseController(w)}
		next.ServeHTTP(b, r.WithContext(service.WithBatcher(r.Context(), b)))
	})
}

// batchWriter holds back flushes between hold and release. Only the watch's
// handler goroutine uses it, as connect's Send does.
type batchWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController // flushes w, through any wrappers
	held    bool
	pending bool
}

// Flush flushes now, or at release when flushes are held.
func (b *batchWriter) Flush() {
	if b.held {
		b.pending = true
		return
	}
	b.rc.Flush()
}

// Unwrap returns the underlying writer, for http.ResponseController.
func (b *batchWriter) Unwrap() http.ResponseWriter { return b.ResponseWriter }

// Hold defers flushes until Release.
func (b *batchWriter) Hold() { b.held = true }

// Release ends a hold and flushes what it held back.
func (b *batchWriter) Release() {
	b.held = false
	if b.pending {
		b.pending = false
		b.Flush()
	}
}
