package service

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestProgressClock checks that one timer ticks every interval for every
// subscribed watcher, and stops once none is left.
func TestProgressClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 30 * time.Second
		c := &progressClock{interval: interval}
		start := time.Now()
		a, b := c.subscribe(), c.subscribe()
		if a != b {
			t.Fatal("two watchers wait on different ticks")
		}
		<-a // both are woken by the same tick
		if d := time.Since(start); d != interval {
			t.Fatalf("the first tick came after %v, want %v", d, interval)
		}
		next := c.next()
		if next == a {
			t.Fatal("next returned the tick that already happened")
		}
		<-next // the timer was rearmed for its subscribers
		if d := time.Since(start); d != 2*interval {
			t.Fatalf("the second tick came after %v, want %v", d, 2*interval)
		}
		c.unsubscribe()
		if !armed(c) {
			t.Fatal("the timer stopped while a watcher is subscribed")
		}
		c.unsubscribe()
		// The last watcher gone, no timer is armed: an idle server does
		// not wake for progress marks nobody waits for.
		if armed(c) {
			t.Fatal("a timer is armed without subscribers")
		}
		// A new subscriber starts it again, a whole interval later.
		time.Sleep(interval / 3)
		start = time.Now()
		<-c.subscribe()
		if d := time.Since(start); d != interval {
			t.Fatalf("the tick of a new subscriber came after %v, want %v", d, interval)
		}
		c.unsubscribe()
		if armed(c) {
			t.Fatal("a timer is armed without subscribers")
		}
	})
}

// TestProgressClockStaleTick checks that the tick of a timer stopped while
// it fired neither wakes the watchers of a new timer early nor rearms.
func TestProgressClockStaleTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &progressClock{interval: time.Hour}
		c.subscribe()
		gen := c.gen
		c.unsubscribe()
		ch := c.subscribe()
		c.tick(gen) // the stopped timer's tick, late
		synctest.Wait()
		select {
		case <-ch:
			t.Fatal("a stale tick woke the new subscriber")
		default:
		}
		c.unsubscribe()
		if armed(c) {
			t.Fatal("a timer is armed without subscribers")
		}
	})
}

func armed(c *progressClock) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timer != nil
}
