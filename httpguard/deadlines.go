package httpguard

import (
	"container/list"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// BodyDeadlines ends the requests whose body (or the part of it that must
// arrive in time: a gRPC stream's first message) has not arrived within a
// timeout, with one timer for all of them. It is the one request-body
// deadline of podsapi's front ends: the gRPC socket's
// (--request-read-timeout) and Track's (the door's).
//
// A read deadline per request (http.ResponseController.SetReadDeadline)
// costs net/http's HTTP/2 server a timer and two hand-offs to the
// connection's goroutine per request, to set the deadline and to lift it,
// although almost every body arrives with its headers. Instead, the
// requests waiting for their body are kept in arrival order, which is also
// the order of their deadlines since they all have the same timeout, and
// one timer is armed for the oldest while any wait: a body that arrives in
// time costs a list insertion and removal, and only a late one gets a read
// deadline, in the past, which fails its reads at once. The timer is armed
// once per timeout while requests come and go, and not at all when none
// come, so that an idle server is not woken.
//
// A nil *BodyDeadlines starts clocks that never expire.
type BodyDeadlines struct {
	timeout time.Duration

	mu      sync.Mutex
	waiting list.List   // of *BodyClock, oldest first
	timer   *time.Timer // created on first use
	armed   bool
}

// NewBodyDeadlines returns the deadlines of bodies that must arrive within
// timeout; nil (no deadline) when timeout is 0 or less.
func NewBodyDeadlines(timeout time.Duration) *BodyDeadlines {
	if timeout <= 0 {
		return nil
	}
	return &BodyDeadlines{timeout: timeout}
}

// BodyClock is the clock of one request's body (BodyDeadlines.Start).
type BodyClock struct {
	d *BodyDeadlines
	w http.ResponseWriter // the request's, for its read deadline

	// started and elem belong to d, under its lock.
	started time.Time
	elem    *list.Element

	mu      sync.Mutex // orders Stop and expire
	stopped atomic.Bool
}

// Start starts the clock of the body of the request answered by w: unless
// it is stopped within the timeout, the request's reads fail with
// os.ErrDeadlineExceeded.
func (d *BodyDeadlines) Start(w http.ResponseWriter) *BodyClock {
	c := &BodyClock{d: d, w: w}
	if d == nil {
		return c
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	c.started = time.Now()
	c.elem = d.waiting.PushBack(c)
	if !d.armed {
		d.armed = true
		d.arm(d.timeout)
	}
	return c
}

// Stop takes the request off the clock: what had to arrive has, or its
// handler returned (after which expire must not touch its writer, which
// net/http may recycle). It reports whether this call stopped it: the
// first does, later ones do nothing.
func (c *BodyClock) Stop() bool {
	c.mu.Lock()
	if c.stopped.Load() {
		c.mu.Unlock()
		return false
	}
	c.stopped.Store(true)
	c.mu.Unlock()
	if d := c.d; d != nil {
		d.mu.Lock()
		if c.elem != nil {
			d.waiting.Remove(c.elem)
			c.elem = nil
		}
		d.mu.Unlock()
	}
	return true
}

// HandlerDone stops the clock as the request's handler returns. A body
// that has not arrived by then keeps its deadline, set on the request
// itself (one SetReadDeadline, for these alone), so that what net/http
// still reads of it (HTTP/1.1: what is left of a body before the
// connection's next request) waits no longer than the timeout either.
func (c *BodyClock) HandlerDone() {
	if c.Stop() && c.d != nil {
		_ = http.NewResponseController(c.w).SetReadDeadline(c.started.Add(c.d.timeout))
	}
}

// Stopped reports whether Stop was called.
func (c *BodyClock) Stopped() bool { return c.stopped.Load() }

// expire ends the reads of c's request with a deadline in the past, unless
// it was stopped meanwhile.
func (c *BodyClock) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped.Load() {
		return
	}
	// A deadline in the past fails the stream's pending and later reads at
	// once (HTTP/2), or the connection's (HTTP/1).
	_ = http.NewResponseController(c.w).SetReadDeadline(c.started)
}

// arm has expire called after wait. d.mu is held.
func (d *BodyDeadlines) arm(wait time.Duration) {
	if d.timer == nil {
		d.timer = time.AfterFunc(wait, d.expire)
	} else {
		d.timer.Reset(wait)
	}
}

// expire ends the requests whose body is late, and arms the timer for the
// next oldest, if any.
func (d *BodyDeadlines) expire() {
	var late []*BodyClock
	d.mu.Lock()
	now := time.Now()
	for e := d.waiting.Front(); e != nil; e = d.waiting.Front() {
		c := e.Value.(*BodyClock)
		if left := c.started.Add(d.timeout).Sub(now); left > 0 {
			d.arm(left)
			break
		}
		d.waiting.Remove(e)
		c.elem = nil
		late = append(late, c)
	}
	d.armed = d.waiting.Len() > 0
	d.mu.Unlock()
	for _, c := range late {
		c.expire()
	}
}

// Waiting returns the number of requests whose body is on the clock.
func (d *BodyDeadlines) Waiting() int {
	if d == nil {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.waiting.Len()
}
