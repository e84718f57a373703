package httpguard

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"testing/synctest"
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
// blocks wakes it and is reset between the timeout and a tick later.
func TestStallGuardParks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 40 * time.Second
		reg := prometheus.NewRegistry()
		g := NewStallGuard(timeout, MetricNames{Prefix: "podsapi"}, reg, slog.New(slog.DiscardHandler))
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { defer close(done); g.Run(stop) }()
		defer func() { close(stop); <-done }()

		// The first tick finds no write: the reaper parks, and stays
		// parked however long nothing is written.
		time.Sleep(timeout)
		synctest.Wait()
		if !g.parked.Load() {
			t.Fatal("the reaper does not park with no write in progress")
		}

		w := &blockingWriter{ResponseWriter: httptest.NewRecorder(), reset: make(chan struct{}), writing: make(chan struct{})}
		served := make(chan struct{})
		go func() {
			defer close(served)
			g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte("event"))
			})).ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/x", nil))
		}()
		<-w.writing
		start := time.Now()
		<-served // only a reset ends the blocked write
		if d := time.Since(start); d < timeout || d > timeout*(StallTicks+1)/StallTicks {
			t.Fatalf("the blocked write was reset after %v, want between %v and %v", d, timeout, timeout*(StallTicks+1)/StallTicks)
		}
		if n := testutil.ToFloat64(g.reset); n != 1 {
			t.Fatalf("podsapi_stalled_streams_reset_total = %v, want 1", n)
		}
		time.Sleep(timeout)
		synctest.Wait()
		if !g.parked.Load() {
			t.Fatal("the reaper does not park again once the write is done")
		}
	})
}
