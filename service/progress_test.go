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
	c.unsubscribe()
	// The timer stops at its next tick: while it runs, that tick comes.
	for ticks := 0; ; ticks++ {
		c.mu.Lock()
		running, ch := c.timer != nil, c.ch
		c.mu.Unlock()
		if !running {
			break
		}
		if ticks > 1 {
			t.Fatalf("the timer ticked %d times without subscribers", ticks)
		}
		<-ch
	}
	// A new subscriber starts it again.
	<-c.subscribe()
	c.unsubscribe()
}
