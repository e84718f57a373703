package transport

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// blockingWriter is a response writer whose writes block until a write
// deadline is set, as a stream's do when its client stops reading.
type blockingWriter struct {
	http.ResponseWriter
	once    sync.Once
	reset   chan struct{}
	writing chan struct{}
}

func (w *blockingWriter) Write(b []byte) (int, error) {
	close(w.writing)
	<-w.reset
	return 0, os.ErrDeadlineExceeded
}

func (w *blockingWriter) SetWriteDeadline(time.Time) error {
	w.once.Do(func() { close(w.reset) })
	return nil
}

// TestStallGuardParks checks that the reaper parks while no write is in
// progress, so that an idle server is not woken, and that a write that
// blocks wakes it and is reset.
func TestStallGuardParks(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := newStallGuard(40*time.Millisecond, reg, slog.New(slog.DiscardHandler))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); g.run(stop) }()
	t.Cleanup(func() { close(stop); <-done })
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting until %s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}

	waitUntil("the reaper parks with no write in progress", g.parked.Load)

	w := &blockingWriter{ResponseWriter: httptest.NewRecorder(), reset: make(chan struct{}), writing: make(chan struct{})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		g.wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("event"))
		})).ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/x", nil))
	}()
	<-w.writing
	<-served // only a reset ends the blocked write
	if n := testutil.ToFloat64(g.reset); n != 1 {
		t.Fatalf("podsapi_stalled_streams_reset_total = %v, want 1", n)
	}
	waitUntil("the reaper parks again", g.parked.Load)
}
