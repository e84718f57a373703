package service

import (
	"testing"
	"time"
)

// TestProgressClock checks that one timer ticks for every subscribed
// watcher, and stops once none is left.
func TestProgressClock(t *testing.T) {
	c := &progressClock{interval: time.Millisecond}
	a, b := c.subscribe(), c.subscribe()
	if a != b {
		t.Fatal("two watchers wait on different ticks")
	}
	<-a // both are woken by the same tick
	next := c.next()
	if next == a {
		t.Fatal("next returned the tick that already happened")
	}
	<-next // the timer was rearmed for its subscribers
	c.unsubscribe()
	if !armed(c) {
		t.Fatal("the timer stopped while a watcher is subscribed")
	}
	c.unsubscribe()
	// The last watcher gone, no timer is armed: an idle server does not
	// wake for progress marks nobody waits for.
	if armed(c) {
		t.Fatal("a timer is armed without subscribers")
	}
	// A new subscriber starts it again.
	<-c.subscribe()
	c.unsubscribe()
	if armed(c) {
		t.Fatal("a timer is armed without subscribers")
	}
}

// TestProgressClockStaleTick checks that the tick of a timer stopped while
// it fired neither wakes the watchers of a new timer early nor rearms.
func TestProgressClockStaleTick(t *testing.T) {
	c := &progressClock{interval: time.Hour}
	c.subscribe()
	gen := c.gen
	c.unsubscribe()
	ch := c.subscribe()
	c.tick(gen) // the stopped timer's tick, late
	select {
	case <-ch:
		t.Fatal("a stale tick woke the new subscriber")
	default:
	}
	c.unsubscribe()
	if armed(c) {
		t.Fatal("a timer is armed without subscribers")
	}
}

func armed(c *progressClock) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timer != nil
}
