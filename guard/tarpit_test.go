package guard_test

import (
	"context"
	"testing"
	"testing/synctest"
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
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				waitReturns(tp, context.Background())
				if d := time.Since(start); d != 0 {
					t.Fatalf("a nil Tarpit waited %v", d)
				}
			})
			if tp.Delay() != 0 || tp.Waiting() != 0 {
				t.Fatalf("nil Tarpit: Delay %v, Waiting %d, want 0, 0", tp.Delay(), tp.Waiting())
			}
		})
	}
}

// TestTarpitCapacity fills a Tarpit of capacity 1 with a refusal delayed by
// an hour: the next refusal is answered at once, and the held one is
// released when its call ends, or after the hour.
func TestTarpitCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tp := guard.NewTarpit(time.Hour, 1)
		held, release := context.WithCancel(context.Background())
		defer release()
		done := make(chan struct{})
		go func() {
			defer close(done)
			tp.Wait(held)
		}()
		synctest.Wait()
		if n := tp.Waiting(); n != 1 {
			t.Fatalf("Waiting with one refusal held = %d, want 1", n)
		}
		start := time.Now()
		waitReturns(tp, context.Background())
		if d := time.Since(start); d != 0 {
			t.Fatalf("a refusal beyond the capacity waited %v, want none", d)
		}
		release()
		<-done
		if d := time.Since(start); d != 0 {
			t.Fatalf("the held refusal ended %v after its call, want at once", d)
		}
		if n := tp.Waiting(); n != 0 {
			t.Fatalf("Waiting after the call ended = %d, want 0", n)
		}
		// Without a deadline or an end, a refusal waits the whole delay.
		start = time.Now()
		waitReturns(tp, context.Background())
		if d := time.Since(start); d != time.Hour {
			t.Fatalf("a refusal waited %v, want the delay, 1h", d)
		}
	})
}

// TestTarpitDeadline: with a deadline shorter than the delay, Wait returns
// by half of what is left of it, so that the refusal reaches the client.
func TestTarpitDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tp := guard.NewTarpit(time.Hour, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		start := time.Now()
		waitReturns(tp, ctx)
		if d := time.Since(start); d != time.Second {
			t.Fatalf("Wait returned after %v, want half the deadline, 1s", d)
		}
		if ctx.Err() != nil {
			t.Fatalf("Wait returned after the deadline: %v", ctx.Err())
		}
	})
}

// waitReturns waits until tp.Wait(ctx) returns. Inside a synctest bubble,
// a Wait that never returns fails the test as a deadlock.
func waitReturns(tp *guard.Tarpit, ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		tp.Wait(ctx)
	}()
	<-done
}
