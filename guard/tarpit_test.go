package guard_test

import (
	"context"
	"testing"
	"time"

	"github.com/podsapi/podsapi/guard"
)

func TestNewTarpitOff(t *testing.T) {
	tests := []struct {
		name     string
		delay    time.Duration
		capacity int
	}{
		{"NoDelay", 0, 10},
		{"NegativeDelay", -time.Second, 10},
		{"NoCapacity", time.Hour, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp := guard.NewTarpit(tt.delay, tt.capacity)
			if tp != nil {
				t.Fatalf("NewTarpit(%v, %d) = %+v, want nil (no delay)", tt.delay, tt.capacity, tp)
			}
			waitReturns(t, tp, context.Background(), "a nil Tarpit")
			if tp.Delay() != 0 || tp.Waiting() != 0 {
				t.Fatalf("nil Tarpit: Delay %v, Waiting %d, want 0, 0", tp.Delay(), tp.Waiting())
			}
		})
	}
}

// TestTarpitCapacity fills a Tarpit of capacity 1 with a refusal delayed by
// an hour: the next refusal is answered at once, and the held one is
// released when its call ends.
func TestTarpitCapacity(t *testing.T) {
	tp := guard.NewTarpit(time.Hour, 1)
	held, release := context.WithCancel(context.Background())
	defer release()
	done := make(chan struct{})
	go func() {
		defer close(done)
		tp.Wait(held)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for tp.Waiting() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the first refusal is not held")
		}
		time.Sleep(time.Millisecond) // polling a condition, bounded above
	}
	waitReturns(t, tp, context.Background(), "a full Tarpit")
	release()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the held refusal did not end with its call")
	}
	if n := tp.Waiting(); n != 0 {
		t.Fatalf("Waiting after the call ended = %d, want 0", n)
	}
}

// TestTarpitDeadline: with a deadline shorter than the delay, Wait returns
// by half of what is left of it, so that the refusal reaches the client.
func TestTarpitDeadline(t *testing.T) {
	tp := guard.NewTarpit(time.Hour, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	waitReturns(t, tp, ctx, "a Tarpit with a 2s deadline and a 1h delay")
	if ctx.Err() != nil {
		t.Fatalf("Wait returned after the deadline: %v", ctx.Err())
	}
}

// waitReturns fails unless tp.Wait(ctx) returns within 15 s.
func waitReturns(t *testing.T, tp *guard.Tarpit, ctx context.Context, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		tp.Wait(ctx)
	}()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatalf("Wait on %s did not return", what)
	}
}
