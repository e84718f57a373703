package httpguard

import (
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// deadlineWriter records the read deadlines set on a call.
type deadlineWriter struct {
	http.ResponseWriter
	mu        sync.Mutex
	deadlines []time.Time
}

func (w *deadlineWriter) SetReadDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deadlines = append(w.deadlines, t)
	return nil
}

func (w *deadlineWriter) set() []time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Time(nil), w.deadlines...)
}

// TestBodyDeadlines runs the deadlines of bodies on synctest's clock: only
// late requests are ended, each once and at its own timeout, and the timer
// is armed only while requests wait.
func TestBodyDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 10 * time.Second
		d := NewBodyDeadlines(timeout)
		call := func() (*BodyClock, *deadlineWriter) {
			w := &deadlineWriter{}
			return d.Start(w), w
		}
		armed := func() bool {
			d.mu.Lock()
			defer d.mu.Unlock()
			return d.armed
		}

		// Requests that arrive in time: nothing is set on their calls,
		// and the timer, armed once, finds nothing to do and is not
		// re-armed, so that an idle server is not woken.
		var ws []*deadlineWriter
		for range 100 {
			b, w := call()
			b.Stop()
			ws = append(ws, w)
		}
		if !armed() || d.Waiting() != 0 {
			t.Fatalf("after 100 calls in time: armed %v, waiting %d; want armed, none waiting", armed(), d.Waiting())
		}
		time.Sleep(timeout)
		synctest.Wait()
		for _, w := range ws {
			if got := w.set(); len(got) != 0 {
				t.Fatalf("a call that had its request got read deadlines %v", got)
			}
		}
		if armed() {
			t.Fatal("the timer is re-armed with no call waiting: an idle server would be woken")
		}

		// Two calls 4 s apart that never get their request: each is ended
		// when its own timeout has passed, not before, and only once.
		first, w1 := call()
		time.Sleep(4 * time.Second)
		second, w2 := call()
		time.Sleep(timeout - 4*time.Second - time.Nanosecond)
		synctest.Wait()
		if got := w1.set(); len(got) != 0 {
			t.Fatal("a call was ended before its timeout")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if got1, got2 := w1.set(), w2.set(); len(got1) != 1 || !got1[0].Before(time.Now()) || len(got2) != 0 {
			t.Fatalf("at the first call's timeout: deadlines %v and %v; want a past deadline on the first only", got1, got2)
		}
		if !armed() || d.Waiting() != 1 {
			t.Fatalf("armed %v, waiting %d; want the timer armed for the second call", armed(), d.Waiting())
		}
		time.Sleep(4*time.Second - time.Nanosecond)
		synctest.Wait()
		if got := w2.set(); len(got) != 0 {
			t.Fatal("the second call was ended before its timeout")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if got1, got2 := w1.set(), w2.set(); len(got2) != 1 || len(got1) != 1 {
			t.Fatalf("deadlines %v and %v; want one each", got1, got2)
		}
		if armed() {
			t.Fatal("the timer is armed with no call waiting")
		}
		first.Stop()
		second.Stop()

		// A call whose handler returned is never touched, even if it was
		// taken off the list by a timer that fired at the same moment.
		late, w3 := call()
		late.Stop()
		late.expire()
		if got := w3.set(); len(got) != 0 {
			t.Fatalf("a lifted call got read deadlines %v", got)
		}
		// The timer armed for late fires with nothing to end.
		time.Sleep(timeout)
		synctest.Wait()
		if armed() {
			t.Fatal("the timer is armed with no call waiting")
		}
	})
}
