package transport

import (
	"container/list"
	"net/http"
	"sync"
	"time"
)

// readDeadlines ends the calls whose request has not arrived within a
// timeout, with one timer for all of them.
//
// A read deadline per call (http.ResponseController.SetReadDeadline) costs
// net/http's HTTP/2 server a timer and two hand-offs to the connection's
// goroutine per call, to set the deadline and to lift it, although almost
// every request arrives with its headers. Instead, the calls waiting for
// their request are kept in arrival order, which is also the order of their
// deadlines since they all have the same timeout, and one timer is armed
// for the oldest while any wait: a request that arrives in time costs a
// list insertion and removal. The timer is armed once per timeout while
// calls come and go, and not at all when none come, so that an idle server
// is not woken.
type readDeadlines struct {
	timeout time.Duration

	mu      sync.Mutex
	waiting list.List   // of *deadlineBody, oldest first
	timer   *time.Timer // created on first use
	armed   bool
}

func newReadDeadlines(timeout time.Duration) *readDeadlines {
	return &readDeadlines{timeout: timeout}
}

// arm has expire called after wait. The lock is held.
func (d *readDeadlines) arm(wait time.Duration) {
	if d.timer == nil {
		d.timer = time.AfterFunc(wait, d.expire)
	} else {
		d.timer.Reset(wait)
	}
}

// add starts the clock of b, whose request must arrive within the timeout.
func (d *readDeadlines) add(b *deadlineBody) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b.started = time.Now()
	b.elem = d.waiting.PushBack(b)
	if d.armed {
		return
	}
	d.armed = true
	d.arm(d.timeout)
}

// remove stops the clock of b: its request has arrived, or its call ended.
func (d *readDeadlines) remove(b *deadlineBody) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if b.elem != nil {
		d.waiting.Remove(b.elem)
		b.elem = nil
	}
}

// expire ends the calls whose request is late, and arms the timer for the
// next oldest, if any.
func (d *readDeadlines) expire() {
	var late []*deadlineBody
	d.mu.Lock()
	now := time.Now()
	for e := d.waiting.Front(); e != nil; e = d.waiting.Front() {
		b := e.Value.(*deadlineBody)
		if left := b.started.Add(d.timeout).Sub(now); left > 0 {
			d.arm(left)
			break
		}
		d.waiting.Remove(e)
		b.elem = nil
		late = append(late, b)
	}
	d.armed = d.waiting.Len() > 0
	d.mu.Unlock()
	for _, b := range late {
		b.expire()
	}
}

// len returns the number of calls waiting for their request.
func (d *readDeadlines) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.waiting.Len()
}

// expire ends the reads of b's request with a deadline in the past, unless
// its request arrived or its handler returned meanwhile: net/http may
// recycle the writer once the handler has returned.
func (b *deadlineBody) expire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lifted.Load() {
		return
	}
	// A deadline in the past fails the stream's pending and later reads at
	// once (HTTP/2), or the connection's (HTTP/1).
	_ = http.NewResponseController(b.w).SetReadDeadline(b.started)
}
