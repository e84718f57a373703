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
// response.
type envelopeWriter struct{ *batchWriter }

// envelopeWrite is the most bytes of framed messages an envelopeWriter hands
// to the response at once: the size of net/http's buffer for the body of an
// HTTP/2 response. A larger write bypasses that buffer and goes out in DATA
// frames as large as the client allows (16 KiB for grpc-go), and net/http's
// framer keeps a write buffer as large as the largest frame it wrote for as
// long as the connection lives: 21 KiB of heap for every idle watcher that
// received a snapshot, against 5 KiB with frames of this size (1000 idle
// watchers, `bench --only idle`).
const envelopeWrite = 4 << 10

// WriteEnvelopes writes b, whole enveloped messages, to the response body,
// in writes of at most envelopeWrite bytes. The flushes stay held as the
// watch asked.
func (e envelopeWriter) WriteEnvelopes(b []byte) error {
	for len(b) > 0 {
		n := min(len(b), envelopeWrite)
		if _, err := e.ResponseWriter.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
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
