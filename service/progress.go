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
// Each tick closes the channel next returned; the timer runs only while
// some watcher is subscribed.
type progressClock struct {
	interval time.Duration

	mu    sync.Mutex
	ch    chan struct{}
	users int
	timer *time.Timer
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
		c.timer = time.AfterFunc(c.interval, c.tick)
	}
	return c.ch
}

// unsubscribe unregisters a watcher.
func (c *progressClock) unsubscribe() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.users--
}

// next returns the channel of the next tick.
func (c *progressClock) next() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ch
}

// tick wakes every subscribed watcher and rearms the timer while some remain.
func (c *progressClock) tick() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.ch)
	c.ch = make(chan struct{})
	if c.users > 0 {
		c.timer.Reset(c.interval)
	} else {
		c.timer = nil
	}
}
