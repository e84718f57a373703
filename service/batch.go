package service

import (
	"context"
	"net/http"

	"github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/gen/v1alpha1/v1alpha1connect"
)

// BatchWatchFlushes wraps a Pods handler, of either wire, so that WatchPods
// can write the events a watcher has queued with one flush instead of one per
// event: connect flushes after every message it sends, which costs a write to
// the socket per event when a watcher has several events waiting. Other
// procedures pass through untouched.
func BatchWatchFlushes(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != podsv1alpha1connect.PodsWatchPodsProcedure && r.URL.Path != v1alpha1connect.PodsWatchPodsProcedure {
			next.ServeHTTP(w, r)
			return
		}
		b := &batchWriter{ResponseWriter: w, rc: http.NewResponseController(w)}
		next.ServeHTTP(b, r.WithContext(context.WithValue(r.Context(), batchKey{}, b)))
	})
}

type batchKey struct{}

// batchFrom returns the batchWriter of a watch, or nil.
func batchFrom(ctx context.Context) *batchWriter {
	b, _ := ctx.Value(batchKey{}).(*batchWriter)
	return b
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

// hold defers flushes until release. b may be nil.
func (b *batchWriter) hold() {
	if b != nil {
		b.held = true
	}
}

// release ends a hold and flushes what it held back. b may be nil.
func (b *batchWriter) release() {
	if b == nil {
		return
	}
	b.held = false
	if b.pending {
		b.pending = false
		b.Flush()
	}
}
