package server

import (
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/guard"
)

// stallTicks is how many ticks of the reaper a write must stay blocked
// before its stream is reset: a stream is reset between timeout and
// timeout*(stallTicks+1)/stallTicks after its write blocked.
const stallTicks = 4

// stallGuard resets the streams whose writes stay blocked longer than a
// timeout because the client stopped reading: typically a watcher dropped
// for falling behind, whose handler would otherwise wait in Send, holding a
// goroutine and its buffers, until the client disconnects. A healthy stream
// pays two atomic increments and an atomic load per write; the clock is
// read only by the reaper, every timeout/stallTicks while a write is in
// progress. When a tick finds none, the reaper parks until the next write
// begins, so that an idle server, watchers included, is not woken.
type stallGuard struct {
	timeout time.Duration
	logs    *guard.LogLimiter // one line per UID every guard.PeerLogInterval
	reset   prometheus.Counter

	mu      sync.Mutex
	writers map[*stallWriter]struct{}

	parked atomic.Bool   // the reaper waits for wake
	wake   chan struct{} // capacity 1
}

func newStallGuard(timeout time.Duration, reg prometheus.Registerer, log *slog.Logger) *stallGuard {
	g := &stallGuard{
		timeout: timeout,
		logs:    guard.NewLogLimiter(log, guard.PeerLogInterval),
		writers: make(map[*stallWriter]struct{}),
		wake:    make(chan struct{}, 1),
		reset: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "podsapi_stalled_streams_reset_total",
			Help: "Number of streams reset because a write to the client stayed blocked for --write-stall-timeout (the client stopped reading).",
		}),
	}
	reg.MustRegister(g.reset)
	return g
}

// wrap returns h with its response writes watched.
func (g *stallGuard) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &stallWriter{ResponseWriter: w, r: r, g: g}
		g.mu.Lock()
		g.writers[sw] = struct{}{}
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			delete(g.writers, sw)
			g.mu.Unlock()
			// After this, the reaper no longer touches w: net/http may
			// recycle it once the handler returns.
			sw.mu.Lock()
			sw.done = true
			sw.mu.Unlock()
		}()
		h.ServeHTTP(sw, r)
	})
}

// run checks the writes every timeout/stallTicks until stop is closed,
// and parks while no write is in progress.
func (g *stallGuard) run(stop <-chan struct{}) {
	t := time.NewTimer(g.timeout / stallTicks)
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
		t.Reset(g.timeout / stallTicks)
	}
}

// unpark wakes the reaper if it is parked.
func (g *stallGuard) unpark() {
	if g.parked.CompareAndSwap(true, false) {
		select {
		case g.wake <- struct{}{}:
		default:
		}
	}
}

// writing reports whether a write is in progress.
func (g *stallGuard) writing() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for sw := range g.writers {
		if sw.seq.Load()%2 == 1 {
			return true
		}
	}
	return false
}

// tick resets the streams whose write has not moved for stallTicks ticks,
// and reports whether a write was in progress.
func (g *stallGuard) tick() (writing bool) {
	var stuck []*stallWriter
	g.mu.Lock()
	for sw := range g.writers {
		seq := sw.seq.Load()
		writing = writing || seq%2 == 1
		if seq%2 == 0 || seq != sw.lastSeq {
			sw.lastSeq, sw.ticks = seq, 0
			continue
		}
		if sw.ticks++; sw.ticks == stallTicks {
			stuck = append(stuck, sw)
		}
	}
	g.mu.Unlock()
	for _, sw := range stuck {
		sw.mu.Lock()
		if !sw.done {
			// A deadline in the past resets the stream (HTTP/2) or fails
			// the connection's writes (HTTP/1) at once, which unblocks the
			// handler.
			if err := http.NewResponseController(sw.ResponseWriter).SetWriteDeadline(time.Now().Add(-time.Second)); err == nil {
				g.reset.Inc()
				g.logs.Warn(guard.PeerFrom(sw.r.Context()), "reset a stream whose client stopped reading",
					"path", sw.r.URL.Path, "blockedFor", g.timeout)
			}
		}
		sw.mu.Unlock()
	}
	return writing
}

// stallWriter counts the writes of a response: seq is odd while a write or
// flush is in progress.
type stallWriter struct {
	http.ResponseWriter
	r   *http.Request
	g   *stallGuard
	seq atomic.Uint64

	// The reaper's view, under stallGuard.mu.
	lastSeq uint64
	ticks   int

	mu   sync.Mutex // held while the reaper resets the stream
	done bool
}

// begin marks a write or flush in progress, and wakes the reaper.
func (w *stallWriter) begin() {
	w.seq.Add(1)
	if w.g.parked.Load() {
		w.g.unpark()
	}
}

func (w *stallWriter) Write(b []byte) (int, error) {
	w.begin()
	defer w.seq.Add(1)
	return w.ResponseWriter.Write(b)
}

func (w *stallWriter) Flush() { _ = w.FlushError() }

// FlushError flushes and reports the error, for http.ResponseController.
func (w *stallWriter) FlushError() error {
	w.begin()
	defer w.seq.Add(1)
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *stallWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
