package transport

import (
	"net/http"
	"testing"
	"time"
)

// deadlineWriter records the read deadlines set on a call.
type deadlineWriter struct {
	http.ResponseWriter
	deadlines []time.Time
}

func (w *deadlineWriter) SetReadDeadline(t time.Time) error {
	w.deadlines = append(w.deadlines, t)
	return nil
}

// TestReadDeadlines drives the reaper with a test clock and timer, calling
// expire as its timer would: only late requests are ended, each once, and the timer
// is armed only while calls wait.
func TestReadDeadlines(t *testing.T) {
	const timeout = 10 * time.Second
	now := time.Unix(1000, 0)
	d := newReadDeadlines(timeout)
	d.now = func() time.Time { return now }
	// The test is the timer: it calls expire itself.
	var arms []time.Duration
	d.arm = func(wait time.Duration) { arms = append(arms, wait) }
	call := func() (*deadlineBody, *deadlineWriter) {
		w := &deadlineWriter{}
		b := &deadlineBody{w: w, deadlines: d, release: func() {}}
		d.add(b)
		return b, w
	}

	// Requests that arrive in time: nothing is set on their calls, and the
	// timer, armed once, finds nothing to do.
	for range 100 {
		b, w := call()
		b.lift()
		if len(w.deadlines) != 0 {
			t.Fatalf("a call that had its request got read deadlines %v", w.deadlines)
		}
	}
	if !d.armed || len(arms) != 1 || arms[0] != timeout || d.len() != 0 {
		t.Fatalf("after 100 calls in time: armed %v (%v), waiting %d; want armed once for the timeout, none waiting", d.armed, arms, d.len())
	}
	now = now.Add(timeout)
	d.expire()
	if d.armed {
		t.Fatal("the timer is re-armed with no call waiting: an idle server would be woken")
	}

	// Two calls 4 s apart that never get their request: each is ended when
	// its own timeout has passed, not before, and only once.
	first, w1 := call()
	now = now.Add(4 * time.Second)
	second, w2 := call()
	now = now.Add(timeout - 4*time.Second - time.Nanosecond)
	d.expire()
	if len(w1.deadlines) != 0 {
		t.Fatal("a call was ended before its timeout")
	}
	now = now.Add(time.Nanosecond)
	d.expire()
	if len(w1.deadlines) != 1 || !w1.deadlines[0].Before(now) || len(w2.deadlines) != 0 {
		t.Fatalf("at the first call's timeout: deadlines %v and %v; want a past deadline on the first only", w1.deadlines, w2.deadlines)
	}
	if !d.armed || d.len() != 1 || arms[len(arms)-1] != 4*time.Second {
		t.Fatalf("armed %v (%v), waiting %d; want the timer armed for the second call, 4 s later", d.armed, arms, d.len())
	}
	now = now.Add(4 * time.Second)
	d.expire()
	if len(w2.deadlines) != 1 || len(w1.deadlines) != 1 {
		t.Fatalf("deadlines %v and %v; want one each", w1.deadlines, w2.deadlines)
	}
	first.lift()
	second.lift()

	// A call whose handler returned is never touched, even if it was
	// taken off the list by a timer that fired at the same moment.
	late, w3 := call()
	late.lift()
	late.expire()
	if len(w3.deadlines) != 0 {
		t.Fatalf("a lifted call got read deadlines %v", w3.deadlines)
	}
}
