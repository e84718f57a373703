package service

import (
	"sync"
	"time"
)

// DefaultProgressInterval is the default interval between the progress marks
// (EVENT_TYPE_PROGRESS) of the watchers that ask for them.
const DefaultProgressInterval = 30 * time.Second

// progressClock ticks every interval for all the watchers that asked for
// progress marks, with one timer for them all rather than one per watcher.
// Each tick closes the channel next returned; the timer is armed only while
// some watcher is subscribed, so that an idle server has no timer to wake
// for.
type progressClock struct {
	interval time.Duration

	mu    sync.Mutex
	ch    chan struct{}
	users int
	timer *time.Timer // nil while no watcher is subscribed
	gen   uint64      // of timer: the tick of a stopped timer does nothing
}

// subscribe registers a watcher and returns the channel of the next tick.
func (c *progressClock) subscribe() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.users++
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	if c.timer == nil {
		c.gen++
		gen := c.gen
		c.timer = time.AfterFunc(c.interval, func() { c.tick(gen) })
	}
	return c.ch
}

// unsubscribe unregisters a watcher, and stops the timer with the last one.
func (c *progressClock) unsubscribe() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.users--
	if c.users == 0 && c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
}

// next returns the channel of the next tick.
func (c *progressClock) next() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ch
}

// tick wakes every subscribed watcher and rearms the timer. A tick of a
// timer stopped by unsubscribe (already running when it was stopped) does
// nothing.
func (c *progressClock) tick(gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer == nil || gen != c.gen {
		return
	}
	close(c.ch)
	c.ch = make(chan struct{})
	c.timer.Reset(c.interval)
}
