package conformance

import (
	"context"
	"testing"
	"time"
)

// TestDeadlineReached checks when a failure counts as the case timeout: the
// case's context ran out, or the implementation ended a call with
// DEADLINE_EXCEEDED just before the case's own timer fired.
func TestDeadlineReached(t *testing.T) {
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	soon, cancel := context.WithTimeout(context.Background(), deadlineSlack/2)
	defer cancel()
	far, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	const server = "seen: stream ended: DEADLINE_EXCEEDED (deadline_exceeded: context deadline exceeded)"
	for _, tc := range []struct {
		name string
		ctx  context.Context
		msg  string
		want bool
	}{
		{"expired", expired, "", true},
		{"no deadline", context.Background(), server, false},
		{"the implementation's deadline, just before the case's", soon, server, true},
		{"another failure, the case's deadline far", far, "expected: an event", false},
		{"the implementation's deadline, long before the case's", far, server, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := deadlineReached(tc.ctx, tc.msg); got != tc.want {
				t.Errorf("deadlineReached = %v, want %v", got, tc.want)
			}
		})
	}
}
