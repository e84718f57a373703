package httpguard

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// request is a request in flight on a Conn (Track).
type request struct {
	w      http.ResponseWriter
	cancel context.CancelFunc
	// mu orders end with the return of the handler, after which net/http
	// may recycle w.
	mu            sync.Mutex
	done          bool
	authenticated bool
	release       func() // the Conn's hold, once authenticated
}

type requestKey struct{}

// RequestTimeouts are the deadlines Track gives every request.
type RequestTimeouts struct {
	// Body bounds the arrival of a request's body, from when its handler
	// starts (its headers read): a request that declares a body and does not send it
	// whole within Body has its reads fail (HTTP/2: its stream's;
	// HTTP/1.1: its connection's, which net/http then closes, also when
	// the handler never read the body and net/http reads what is left
	// before answering). Zero: no deadline.
	Body time.Duration
	// Tail bounds the end of a response, what net/http still writes once
	// the handler has returned (HTTP/2: what a client's receive window
	// holds back): the stream is reset (HTTP/2) or the connection closed
	// (HTTP/1.1) when it has not been written by then. While the handler
	// runs, its writes are the StallGuard's. Zero: no deadline.
	Tail time.Duration
}

// Track follows every request of h on its Conn, so that shedding knows
// which are an authenticated caller's work (Authenticated) and GoAway can
// end those that are not, and gives each the deadlines of t. A connection
// its handler takes over (an upgrade) is not bounded by them, and is held
// (never shed) until the handler returns.
func Track(h http.Handler, t RequestTimeouts) http.Handler {
	bodies := NewBodyDeadlines(t.Body)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := ConnFrom(r.Context())
		if c == nil {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if r.ProtoMajor == 1 {
			// An HTTP/1.1 connection keeps the write deadline of its last
			// response.
			_ = rc.SetWriteDeadline(time.Time{})
		}
		ctx, cancel := context.WithCancel(r.Context())
		req := &request{w: w, cancel: cancel}
		ctx = context.WithValue(ctx, requestKey{}, req)
		r = r.WithContext(ctx)
		if bodies != nil && r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
			clock := bodies.Start(w)
			defer clock.HandlerDone()
			r.Body = &boundBody{ReadCloser: r.Body, clock: clock}
		}
		c.track(req)
		tw := &trackedWriter{ResponseWriter: w, req: req, c: c}
		defer func() {
			c.untrack(req)
			req.mu.Lock()
			req.done = true
			if req.release != nil {
				req.release()
			} else {
				c.anonymous.Store(true)
			}
			req.mu.Unlock()
			cancel()
			if t.Tail > 0 && !tw.hijacked {
				_ = rc.SetWriteDeadline(time.Now().Add(t.Tail))
			}
		}()
		h.ServeHTTP(tw, r)
	})
}

// Authenticated marks the request of ctx as an authenticated caller's work
// (Conn.Hold) until it ends: its connection is not shed meanwhile, and
// GoAway spares it. It does nothing for a request Track does not follow.
func Authenticated(ctx context.Context) {
	req, _ := ctx.Value(requestKey{}).(*request)
	c := ConnFrom(ctx)
	if req == nil || c == nil {
		return
	}
	req.hold(c)
}

// hold marks req as an authenticated caller's work on c, once.
func (req *request) hold(c *Conn) {
	req.mu.Lock()
	defer req.mu.Unlock()
	if req.authenticated || req.done {
		return
	}
	req.authenticated = true
	req.release = c.Hold()
}

// GoAway ends the connection of r, which carried a request without valid
// credentials, as the API server ends it (k8s.io/apiserver's
// UnauthenticatedHTTP2DOSMitigation): over HTTP/2, the answer says
// "Connection: close", which Go's server turns into a GOAWAY: the
// connection takes no new stream, and closes once its streams are done.
// After grace, if no authenticated caller's work is in flight on it, the
// connection is closed whatever its streams are doing (a client that does
// not read holds them); otherwise the requests in flight that are not an
// authenticated caller's are ended (their context cancelled, their stream
// reset), and the authenticated ones finish. It must be called before the
// answer is written. HTTP/1.1 connections are left open, as the API server
// leaves them: they carry one request at a time, and are shed first.
func GoAway(w http.ResponseWriter, r *http.Request, grace time.Duration) {
	if r.ProtoMajor != 2 {
		return
	}
	w.Header().Set("Connection", "close")
	c := ConnFrom(r.Context())
	if c == nil || grace <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.goAway != nil || c.closed {
		return
	}
	c.goAway = time.AfterFunc(grace, c.endUnauthenticated)
}

// endUnauthenticated closes c unless work for an authenticated caller is
// in flight on it, and then ends the requests that are not.
func (c *Conn) endUnauthenticated() {
	if c.holds.Load() == 0 {
		_ = c.Close()
		return
	}
	c.mu.Lock()
	var ending []*request
	for req := range c.requests {
		ending = append(ending, req)
	}
	c.mu.Unlock()
	for _, req := range ending {
		req.end()
	}
}

// end ends req, unless it is an authenticated caller's or its handler has
// returned: its context is cancelled, and a write deadline in the past
// resets its stream.
func (req *request) end() {
	req.mu.Lock()
	defer req.mu.Unlock()
	if req.done || req.authenticated {
		return
	}
	req.cancel()
	_ = http.NewResponseController(req.w).SetWriteDeadline(time.Unix(1, 0))
}

func (c *Conn) track(req *request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.requests == nil {
		c.requests = make(map[*request]struct{})
	}
	c.requests[req] = struct{}{}
}

func (c *Conn) untrack(req *request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.requests, req)
}

// HoldStates is the http.Server.ConnState of a server whose every request
// is an authenticated caller's work (the metrics endpoint, which only its
// socket's permissions let in): a connection is held while a request is
// active on it, and may be shed while it is new or idle.
func HoldStates(nc net.Conn, s http.ConnState) {
	c := ConnOf(nc)
	if c == nil {
		return
	}
	if s == http.StateActive {
		release := c.Hold()
		if old := c.stateRelease.Swap(&release); old != nil {
			(*old)()
		}
		return
	}
	if old := c.stateRelease.Swap(nil); old != nil {
		(*old)()
	}
}

// trackedWriter notes whether the connection was taken over, so that Track
// sets no deadline on it after.
type trackedWriter struct {
	http.ResponseWriter
	req      *request
	c        *Conn
	hijacked bool
}

// Hijack takes the connection over (an upgrade the handler accepted, such
// as one the API server answered 101 for the door): it is held, never
// shed, until the handler returns.
func (w *trackedWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.hijacked = true
		w.req.hold(w.c)
	}
	return c, rw, err
}

// Flush sends what is buffered.
func (w *trackedWriter) Flush() { _ = w.FlushError() }

// FlushError flushes and reports the error, for http.ResponseController.
func (w *trackedWriter) FlushError() error {
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap returns the writer below, for http.ResponseController.
func (w *trackedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// boundBody is a request body under Track's body deadline, stopped once
// the body has arrived whole.
type boundBody struct {
	io.ReadCloser
	clock *BodyClock
}

func (b *boundBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.clock.Stop()
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = ErrBodyTimeout
	}
	return n, err
}

// ErrBodyTimeout is the error of a read of a request body that did not
// arrive within RequestTimeouts.Body.
var ErrBodyTimeout = errors.New("the request body did not arrive in time")
