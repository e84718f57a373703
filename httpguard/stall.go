package httpguard

import (
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/guard"
)

// StallTicks is how many ticks of the reaper a write must stay blocked
// before its stream is reset or its connection closed: that happens between
// timeout and timeout*(StallTicks+1)/StallTicks after the write blocked.
const StallTicks = 4

// StallGuard ends the writes that stay blocked longer than a timeout
// because the client stopped reading:
//   - a stream's (its flow-control window is spent): typically a watcher
//     dropped for falling behind, whose handler would otherwise wait in
//     Send, holding a goroutine and its buffers, until the client
//     disconnects. The stream is reset.
//   - a connection's (the socket's buffer is full): every stream of the
//     connection waits on it. The connection is closed.
//
// A write pays two atomic increments and an atomic load; the clock is read
// only by the reaper, every timeout/StallTicks while a write is in
// progress. When a tick finds none, the reaper parks until the next write
// begins, so that an idle server, watchers included, is not woken. (This
// replaces net/http's HTTP2Config.WriteByteTimeout, which sets and clears a
// deadline, a runtime timer, around every write to the socket.)
type StallGuard struct {
	timeout time.Duration
	logs    *guard.LogLimiter // one line per UID every guard.PeerLogInterval
	reset   prometheus.Counter
	closed  prometheus.Counter

	mu     sync.Mutex
	clocks map[*writeClock]struct{}

	parked atomic.Bool   // the reaper waits for wake
	wake   chan struct{} // capacity 1
}

// NewStallGuard returns the guard that ends writes blocked for timeout,
// its metrics named by names and registered with reg (nil: registered
// nowhere): PREFIX_stalled_streams_reset_total and
// PREFIX_stalled_connections_closed_total. Its reaper runs in Run.
func NewStallGuard(timeout time.Duration, names MetricNames, reg prometheus.Registerer, log *slog.Logger) *StallGuard {
	g := &StallGuard{
		timeout: timeout,
		logs:    guard.NewLogLimiter(log, guard.PeerLogInterval),
		clocks:  make(map[*writeClock]struct{}),
		wake:    make(chan struct{}, 1),
		reset: prometheus.NewCounter(prometheus.CounterOpts{
			Name: names.Prefix + "_stalled_streams_reset_total",
			Help: "Number of streams to " + names.What + " reset because a write to the client stayed blocked for " + names.StallFlag + " (the client stopped reading the stream).",
		}),
		closed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: names.Prefix + "_stalled_connections_closed_total",
			Help: "Number of connections to " + names.What + " closed because a write to the socket stayed blocked for " + names.StallFlag + " (the client stopped reading the connection).",
		}),
	}
	if reg != nil {
		reg.MustRegister(g.reset, g.closed)
	}
	return g
}

// writeClock follows the writes of a stream or a connection: seq is odd
// while a write is in progress.
type writeClock struct {
	g   *StallGuard
	seq atomic.Uint64
	// stalled ends the blocked write; the reaper calls it once, without
	// holding its lock.
	stalled func()

	// The reaper's view, under stallGuard.mu.
	lastSeq uint64
	ticks   int
}

// watch starts following the writes of a stream or connection, which
// stalled ends.
func (g *StallGuard) watch(stalled func()) *writeClock {
	c := &writeClock{g: g, stalled: stalled}
	g.mu.Lock()
	g.clocks[c] = struct{}{}
	g.mu.Unlock()
	return c
}

// unwatch stops following c: its stream or connection is done.
func (g *StallGuard) unwatch(c *writeClock) {
	g.mu.Lock()
	delete(g.clocks, c)
	g.mu.Unlock()
}

// begin marks a write in progress, and wakes the reaper.
func (c *writeClock) begin() {
	c.seq.Add(1)
	if c.g.parked.Load() {
		c.g.unpark()
	}
}

// end marks the write done.
func (c *writeClock) end() { c.seq.Add(1) }

// Wrap returns h with its response writes watched: a write or flush that
// stays blocked for the timeout resets the stream (HTTP/2) or fails the
// connection's writes (HTTP/1.1), and the handler sees its error.
func (g *StallGuard) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &stallWriter{ResponseWriter: w}
		sw.clock = g.watch(func() { g.resetStream(sw, r) })
		defer func() {
			g.unwatch(sw.clock)
			// After this, the reaper no longer touches w: net/http may
			// recycle it once the handler returns.
			sw.mu.Lock()
			sw.done = true
			sw.mu.Unlock()
		}()
		h.ServeHTTP(sw, r)
	})
}

// resetStream resets the stream of sw, unless its handler has returned.
func (g *StallGuard) resetStream(sw *stallWriter, r *http.Request) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.done {
		return
	}
	// A deadline in the past resets the stream (HTTP/2) or fails the
	// connection's writes (HTTP/1) at once, which unblocks the handler.
	if err := http.NewResponseController(sw.ResponseWriter).SetWriteDeadline(time.Now().Add(-time.Second)); err == nil {
		g.reset.Inc()
		g.logs.Warn(guard.PeerFrom(r.Context()), "reset a stream whose client stopped reading",
			"path", r.URL.Path, "blockedFor", g.timeout)
	}
}

// watchConn has c closed when a write to it stays blocked.
func (g *StallGuard) watchConn(c *Conn) {
	c.stall = g.watch(func() {
		g.closed.Inc()
		g.logs.Warn(c.peer(), "closed a connection whose client stopped reading", "blockedFor", g.timeout)
		_ = c.Close()
	})
}

// Run checks the writes every timeout/StallTicks until stop is closed,
// and parks while no write is in progress.
func (g *StallGuard) Run(stop <-chan struct{}) {
	t := time.NewTimer(g.timeout / StallTicks)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if !g.tick() {
			// Park, then look again: a write that began before parked
			// was set is seen here, one that begins after it wakes the
			// reaper.
			g.parked.Store(true)
			if !g.writing() {
				select {
				case <-stop:
					return
				case <-g.wake:
				}
			}
			g.parked.Store(false)
		}
		t.Reset(g.timeout / StallTicks)
	}
}

// unpark wakes the reaper if it is parked.
func (g *StallGuard) unpark() {
	if g.parked.CompareAndSwap(true, false) {
		select {
		case g.wake <- struct{}{}:
		default:
		}
	}
}

// writing reports whether a write is in progress.
func (g *StallGuard) writing() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for c := range g.clocks {
		if c.seq.Load()%2 == 1 {
			return true
		}
	}
	return false
}

// tick ends the writes that have not moved for StallTicks ticks, and
// reports whether a write was in progress.
func (g *StallGuard) tick() (writing bool) {
	var stuck []*writeClock
	g.mu.Lock()
	for c := range g.clocks {
		seq := c.seq.Load()
		writing = writing || seq%2 == 1
		if seq%2 == 0 || seq != c.lastSeq {
			c.lastSeq, c.ticks = seq, 0
			continue
		}
		if c.ticks++; c.ticks == StallTicks {
			stuck = append(stuck, c)
		}
	}
	g.mu.Unlock()
	for _, c := range stuck {
		c.stalled()
	}
	return writing
}

// stallWriter follows the writes and flushes of a response.
type stallWriter struct {
	http.ResponseWriter
	clock *writeClock

	mu   sync.Mutex // held while the reaper resets the stream
	done bool
}

func (w *stallWriter) Write(b []byte) (int, error) {
	w.clock.begin()
	defer w.clock.end()
	return w.ResponseWriter.Write(b)
}

func (w *stallWriter) Flush() { _ = w.FlushError() }

// FlushError flushes and reports the error, for http.ResponseController.
func (w *stallWriter) FlushError() error {
	w.clock.begin()
	defer w.clock.end()
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *stallWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
