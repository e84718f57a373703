// Package retry computes the waits between attempts to reach a peer that
// went away: exponential, capped and jittered, so that many clients of one
// restarted server do not come back at the same instant.
package retry

import (
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Backoff is apimachinery's wait.Backoff with a way back to its first step.
// It is not safe for concurrent use.
type Backoff struct {
	first, cur wait.Backoff
}

// NewBackoff returns waits that start at first, double at each step up to
// limit, and are each lengthened by a random part of up to half.
func NewBackoff(first, limit time.Duration) *Backoff {
	b := wait.Backoff{Duration: first, Factor: 2, Jitter: 0.5, Steps: math.MaxInt32, Cap: limit}
	return &Backoff{first: b, cur: b}
}

// Next returns the next wait.
func (b *Backoff) Next() time.Duration { return b.cur.Step() }

// Reset makes the next wait the first again, after a success.
func (b *Backoff) Reset() { b.cur = b.first }
