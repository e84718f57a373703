package service

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/podsapi/podsapi/budget"
	"github.com/podsapi/podsapi/internal/admit"
	"github.com/podsapi/podsapi/store"
)

// The defaults of the waits of FindPods (WithFindWait).
const (
	// DefaultMaxFindWait caps the wait a FindPods request asks for.
	DefaultMaxFindWait = 5 * time.Second
	// DefaultMaxFindWaiters bounds the FindPods calls waiting at once.
	DefaultMaxFindWaiters = 4096
	// DefaultMaxFindWaitersPerClient bounds those of one client.
	DefaultMaxFindWaitersPerClient = 256
)

// FindWaiterBytes is what a waiting FindPods call is counted for against
// the memory budget (kind budget.Waiters): an estimate of the server's part
// of what TestFindWaitersMemory measures per waiting call, client and
// server together (its handler's goroutine and stack, its request, its
// timer, its HTTP/2 stream).
const FindWaiterBytes = 32 << 10

// findLookup looks the key of a FindPods request up once. It returns the
// matches, or miss, the NOT_FOUND of a key that matches nothing yet (which
// a wait waits out), or err, a failure a wait cannot change.
type findLookup func() (version uint64, ms []store.Match, miss, err error)

// findWaiters bounds the FindPods calls that wait, in all and per client
// (admit.Slots: a client's share is the smaller of its bound and half the
// total), and counts them against the memory budget.
type findWaiters struct {
	max    time.Duration
	slots  *admit.Slots
	budget *budget.Budget
}

// admit takes a waiter's slot for client, or fails with
// TOO_MANY_FIND_WAITERS or MEMORY_BUDGET_EXCEEDED; release frees it.
func (w *findWaiters) admit(client string) (release func(), err error) {
	free, err := w.slots.Acquire(client)
	if err != nil {
		var full *admit.SlotsFull
		if errors.As(err, &full) {
			return nil, errTooManyFindWaiters(full.Limit, full.Key)
		}
		return nil, err
	}
	if err := w.budget.ReserveFor(client, budget.Waiters, FindWaiterBytes); err != nil {
		free()
		return nil, errWaiterMemory(client)
	}
	return func() {
		w.budget.ReleaseFor(client, budget.Waiters, FindWaiterBytes)
		free()
	}, nil
}

// waiting returns how many calls wait.
func (w *findWaiters) waiting() int { return w.slots.Held() }

// findWait returns how long a request with wait may wait: at most the
// server's cap, 0 for none.
func (h *handler) findWait(wait *durationpb.Duration) (time.Duration, error) {
	if wait == nil {
		return 0, nil
	}
	if err := wait.CheckValid(); err != nil {
		return 0, errFindKey("wait", "not a valid duration")
	}
	d := wait.AsDuration()
	if d < 0 {
		return 0, errFindKey("wait", "a wait is not negative")
	}
	return min(d, h.waiters.max), nil
}

// find looks a key up with lookup and, while it matches nothing yet, waits
// at most d, looking it up again, its own key only, at each change of the
// store: the waiting call holds its slot (findWaiters), a timer, and the
// store's channel of changes that every waiter shares.
func (h *handler) find(ctx context.Context, d time.Duration, lookup findLookup) (uint64, []store.Match, error) {
	version, ms, miss, err := lookup()
	if err == nil && miss != nil && d > 0 {
		return h.wait(ctx, d, lookup)
	}
	if err == nil {
		err = miss
	}
	return version, ms, err
}

// wait is find for a key that matched nothing at first.
func (h *handler) wait(ctx context.Context, d time.Duration, lookup findLookup) (uint64, []store.Match, error) {
	release, err := h.waiters.admit(h.clientOf(ctx))
	if err != nil {
		return 0, nil, err
	}
	defer release()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		// The channel is taken before the lookup: a change after the
		// lookup closes it.
		changed := h.store.Changed()
		version, ms, miss, err := lookup()
		if err != nil || miss == nil {
			return version, ms, err
		}
		select {
		case <-changed:
		case <-timer.C:
			return 0, nil, miss
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return 0, nil, connect.NewError(connect.CodeDeadlineExceeded, ctx.Err())
			}
			return 0, nil, connect.NewError(connect.CodeCanceled, ctx.Err())
		case <-h.shutdown:
			return 0, nil, errShuttingDown
		}
	}
}
