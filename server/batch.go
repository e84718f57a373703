package server

import (
	"net/http"
	"strings"

	"github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/gen/v1alpha1/v1alpha1connect"
	"github.com/podsapi/podsapi/service"
)

// batchWatchFlushes wraps the Pods handlers, of either wire, so that
// WatchPods can write the events a watcher has queued with one flush instead
// of one per event: connect flushes after every message it sends, which costs
// a write to the socket per event when a watcher has several events waiting.
// The watch holds and releases the flushes through service.Batcher. A watch
// in binary protobuf may also write its snapshot, framed and shared by every
// watcher starting with it, in a few large writes that bypass connect
// (service.EnvelopeWriter). Other procedures pass through untouched.
func batchWatchFlushes(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != podsv1alpha1connect.PodsWatchPodsProcedure && r.URL.Path != v1alpha1connect.PodsWatchPodsProcedure {
			next.ServeHTTP(w, r)
			return
		}
		b := &batchWriter{ResponseWriter: w, rc: http.NewResponseController(w)}
		var batcher service.Batcher = b
		if binaryStreams[strings.ToLower(r.Header.Get("Content-Type"))] {
			batcher = envelopeWriter{b}
		}
		next.ServeHTTP(b, r.WithContext(service.WithBatcher(r.Context(), batcher)))
	})
}

// binaryStreams are the content types of the streams whose messages connect
// encodes with its binary protobuf codec, in the envelopes of gRPC, gRPC-Web
// and the Connect protocol: the watches of these alone may write messages
// they framed themselves (service.EnvelopeWriter). Messages in JSON are
// encoded by connect alone.
var binaryStreams = map[string]bool{
	"application/grpc":           true,
	"application/grpc+proto":     true,
	"application/grpc-web":       true,
	"application/grpc-web+proto": true,
	"application/connect+proto":  true,
}

// envelopeWriter is the batchWriter of a watch whose messages are binary
// protobuf: it also writes messages the watch framed itself, straight to the
// response, as one write however many they are.
type envelopeWriter struct{ *batchWriter }

// WriteEnvelopes writes b, whole enveloped messages, to the response body.
// The flushes stay held as the watch asked.
func (e envelopeWriter) WriteEnvelopes(b []byte) error {
	_, err := e.ResponseWriter.Write(b)
	return err
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
