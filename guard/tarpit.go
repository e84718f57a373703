package guard

import (
	"context"
	"time"
)

// DefaultTarpitCapacity is how many refused calls a Tarpit made by the
// server holds at once; refusals beyond it are answered at once.
const DefaultTarpitCapacity = 1024

// Tarpit delays the answer to a call refused by a rate limit. A client that
// retries as soon as it is refused is slowed to one call per delay and
// stream, so that a flood of refusals costs the server timers instead of
// the CPUs its watchers need: refused at once, 16 such clients on two cores
// make over 10,000 calls a second, and each call is handled by several
// goroutines of the HTTP/2 server that the watch handlers queue behind. The
// refusal itself stays RESOURCE_EXHAUSTED.
//
// A nil *Tarpit delays nothing.
type Tarpit struct {
	delay time.Duration
	slots chan struct{}
}

// NewTarpit returns a Tarpit that delays refusals by delay, holding at most
// capacity of them at once (refusals beyond it are answered at once, so
// that the delay never holds more goroutines than that). It returns nil,
// which delays nothing, when delay or capacity is not positive.
func NewTarpit(delay time.Duration, capacity int) *Tarpit {
	if delay <= 0 || capacity <= 0 {
		return nil
	}
	return &Tarpit{delay: delay, slots: make(chan struct{}, capacity)}
}

// Delay returns the delay of t; 0 when t is nil.
func (t *Tarpit) Delay() time.Duration {
	if t == nil {
		return 0
	}
	return t.delay
}

// Waiting returns how many refusals t holds now.
func (t *Tarpit) Waiting() int {
	if t == nil {
		return 0
	}
	return len(t.slots)
}

// Wait blocks for the delay of t before a refusal is answered, or for half
// of what is left until the deadline of ctx when that is shorter, so that a
// client with a short deadline still hears RESOURCE_EXHAUSTED rather than
// DEADLINE_EXCEEDED. It returns early when ctx ends, and at once when t is
// nil or already holds its capacity.
func (t *Tarpit) Wait(ctx context.Context) {
	if t == nil {
		return
	}
	d := t.delay
	if deadline, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(deadline)/2)
	}
	if d <= 0 {
		return
	}
	select {
	case t.slots <- struct{}{}:
	default:
		return // full: answer at once rather than hold more goroutines
	}
	defer func() { <-t.slots }()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}
