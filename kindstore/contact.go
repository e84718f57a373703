package kindstore

import (
	"sync"
	"time"
)

// contact is when the API server was last heard from by a Store's feed,
// for how old its answers may be.
type contact struct {
	mu sync.Mutex
	// open counts the feed's watches open now: while one is, the store is
	// as current as the API server's events make it.
	open int
	// last is when the feed last heard from the API server: created at
	// first, then the end of its last watch or its last answer.
	last time.Time
	now  func() time.Time
}

func (c *contact) init() {
	c.now = time.Now
	c.last = c.now()
}

// Contact records an answer of the API server to the store's feed (a
// list, a watch opened or ended, an event), and what it did to the feed's
// watches.
func (c *contact) Contact(watch WatchState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch watch {
	case WatchOpened:
		c.open++
	case WatchClosed:
		c.open = max(c.open-1, 0)
	}
	c.last = c.now()
}

// WatchState is what an answer of the API server did to the feed's watch.
type WatchState int

// The answers Contact records.
const (
	// Answered: an answer that opened or closed no watch (a list).
	Answered WatchState = iota
	// WatchOpened: a watch of the API server opened.
	WatchOpened
	// WatchClosed: a watch of the API server ended.
	WatchClosed
)

// Age returns how old the store's state may be at now: zero while a watch
// of the feed is open, else the time since the API server was last heard
// from (since the store was created, before it ever was).
func (c *contact) Age(now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open > 0 {
		return 0
	}
	return max(now.Sub(c.last), 0)
}
