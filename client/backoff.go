package client

import (
	"math/rand/v2"
	"time"
)

// backoff computes jittered exponential delays between min and max.
type backoff struct {
	min, max time.Duration
	next     time.Duration // the delay before jitter of the next retry
}

// delay returns the delay before the next retry, and doubles the following
// one. The delay is uniformly distributed in [d/2, d], d growing from min to
// max.
func (b *backoff) delay() time.Duration {
	d := b.next
	if d <= 0 {
		d = b.min
	}
	b.next = min(d*2, b.max)
	if d > b.max {
		d = b.max
	}
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + rand.N(d-half+1)
}

// reset makes the next delay the shortest again.
func (b *backoff) reset() { b.next = 0 }
