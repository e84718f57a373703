package door

import (
	"bufio"
	"net"
	"net/http"
	"time"
)

// boundWrites bounds the time each write of a response may take to d, so
// that a client that does not read (an HTTP/2 receive window of zero, a
// TCP window of zero) has its response ended and freed: every Write and
// Flush of h sets a write deadline before it and clears it after it, and
// the end of the response (what net/http flushes once h returns) has d
// too. A response that writes nothing is not bounded by it: a watch
// waiting for events, or a pass-through waiting for the API server, lasts
// as long as it lasts. Over HTTP/2 a deadline that passes resets the
// stream (Go's server); over HTTP/1.1 it fails the write, and the
// connection is closed. Upgraded connections (kubectl exec, attach,
// port-forward) are not bounded: a deadline would outlive the hijack.
func boundWrites(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d <= 0 || r.Header.Get("Upgrade") != "" {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		// An HTTP/1.1 connection keeps the deadline of its last response.
		_ = rc.SetWriteDeadline(time.Time{})
		bw := &boundWriter{ResponseWriter: w, rc: rc, d: d}
		h.ServeHTTP(bw, r)
		if !bw.hijacked {
			_ = rc.SetWriteDeadline(time.Now().Add(d))
		}
	})
}

// boundWriter sets a write deadline around each write of the writer it
// wraps. Unwrap gives http.ResponseController the rest.
type boundWriter struct {
	http.ResponseWriter
	rc       *http.ResponseController
	d        time.Duration
	hijacked bool
}

func (w *boundWriter) Write(b []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	n, err := w.ResponseWriter.Write(b)
	_ = w.rc.SetWriteDeadline(time.Time{})
	return n, err
}

// Flush sends what is buffered, within the bound.
func (w *boundWriter) Flush() {
	_ = w.FlushError()
}

// FlushError is Flush, returning its error (http.ResponseController).
func (w *boundWriter) FlushError() error {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	err := w.rc.Flush()
	_ = w.rc.SetWriteDeadline(time.Time{})
	return err
}

// Hijack takes the connection over (a pass-through upgrade without an
// Upgrade header has none to take).
func (w *boundWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := w.rc.Hijack()
	if err == nil {
		w.hijacked = true
	}
	return c, rw, err
}

// Unwrap returns the writer below, for http.ResponseController.
func (w *boundWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
