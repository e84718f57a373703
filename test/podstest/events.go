package podstest

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
)

// Events counts what a server under test signals (the requests it has
// served to their end, the connections it has accepted and closed), so
// that a test waits for the events it caused before it reads the state
// they change: a metric is read after the event, never polled. The server
// tests feed it from the hooks of server.New (internal/hooks), the service
// tests from their in-memory harness. It is safe for concurrent use.
type Events struct {
	mu       sync.Mutex
	changed  chan struct{} // closed and replaced at each event
	served   map[string]int
	accepted int
	closed   int
}

// NewEvents returns Events that have counted nothing.
func NewEvents() *Events {
	return &Events{changed: make(chan struct{}), served: map[string]int{}}
}

// Served counts a request served to its end: its handlers, and the guards
// and transport around them, have returned.
func (e *Events) Served(r *http.Request) { e.event(func() { e.served[r.URL.Path]++ }) }

// Accepted counts a connection accepted and counted among the open ones.
func (e *Events) Accepted() { e.event(func() { e.accepted++ }) }

// Closed counts a connection closed, its slot freed.
func (e *Events) Closed() { e.event(func() { e.closed++ }) }

func (e *Events) event(count func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	count()
	close(e.changed)
	e.changed = make(chan struct{})
}

// wait waits until cond holds of the counts, bounded by the events: a
// server that never signals them fails the test shortly before go test's
// -timeout would stop it, naming what it waited for.
func (e *Events) wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	expired, stop := NearDeadline(t)
	defer stop()
	for {
		e.mu.Lock()
		ok, changed := cond(), e.changed
		e.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-expired:
			t.Fatalf("go test's -timeout is near: still waiting until %s", what)
		}
	}
}

// WaitServed waits until n requests of procedure (their URL path) have been
// served to their end, in all.
func (e *Events) WaitServed(t *testing.T, procedure string, n int) {
	t.Helper()
	e.wait(t, fmt.Sprintf("%d calls of %s are served", n, procedure), func() bool { return e.served[procedure] >= n })
}

// WaitAccepted waits until n connections have been accepted, in all.
func (e *Events) WaitAccepted(t *testing.T, n int) {
	t.Helper()
	e.wait(t, fmt.Sprintf("%d connections are accepted", n), func() bool { return e.accepted >= n })
}

// WaitClosed waits until n connections have been closed and their slots
// freed, in all.
func (e *Events) WaitClosed(t *testing.T, n int) {
	t.Helper()
	e.wait(t, fmt.Sprintf("%d connections are closed", n), func() bool { return e.closed >= n })
}
