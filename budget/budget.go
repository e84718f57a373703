package budget

import (
	"errors"
	"sync"
	"sync/atomic"
)

// Kind is what the bytes of a Budget are held for.
type Kind int

// The kinds of memory a Budget counts: everything the server keeps on
// behalf of its clients.
const (
	// Views are the pod versions trimmed by field masks, and the enveloped
	// watch events, that the pods cache for their readers.
	Views Kind = iota
	// Lists are the cached ListPods responses.
	Lists
	// Snapshots are the enveloped watch snapshots in flight.
	Snapshots
	// Replays are the enveloped changes of the history that resumed watches
	// share.
	Replays
	// Queued are the live events queued for watchers.
	Queued
	// History is the store's history of changes, kept for watches that
	// resume.
	History
	// Runtime are the facts the container runtime told of its pods and
	// containers (NRI), kept for FindPods.
	Runtime
	// Waiters are the FindPods calls waiting for their key to become
	// known, each counted for a fixed estimate of what it holds.
	Waiters
	// NumKinds is the number of kinds.
	NumKinds
)

// KindNames are the names of the kinds, the values of the kind label of
// podsapi_memory_used_bytes.
var KindNames = [NumKinds]string{"views", "lists", "snapshots", "replays", "queued", "history", "runtime", "waiters"}

// DefaultFraction is the share of the memory limit the default budget
// takes: the other half is the runtime's own, the transport's buffers, the
// sources' decoding and garbage not yet collected.
const DefaultFraction = 0.5

// DefaultBytes is the budget without a memory limit.
const DefaultBytes = 512 << 20

// DefaultClientShare is the divisor of a client's fair share: one client
// may hold at most 1/DefaultClientShare of the budget in what it alone
// holds (ReserveFor).
const DefaultClientShare = 4

// Bytes returns the default budget for a memory limit in bytes
// (Limit's; 0 for none): DefaultFraction of it, or DefaultBytes
// without a limit.
func Bytes(limit int64) int64 {
	if limit <= 0 {
		return DefaultBytes
	}
	return int64(float64(limit) * DefaultFraction)
}

// ForSetting returns the budget a setting of n bytes asks for (the flag
// --memory-budget-bytes): n bytes; for 0, the default, Bytes of the
// runtime's memory limit (Limit); nil, no budget, for a negative n.
func ForSetting(n int64) *Budget {
	switch {
	case n < 0:
		return nil
	case n == 0:
		return New(Bytes(Limit()))
	}
	return New(n)
}

// Budget counts the bytes the server keeps on behalf of its clients against
// one bound. The caches ask it before they keep bytes (Reserve) and return
// them when they drop them (Release); what is bounded elsewhere (the
// history, the queues) is counted through Track. A nil *Budget allows
// everything and counts nothing. Safe for concurrent use.
type Budget struct {
	total     int64
	perClient int64
	used      [NumKinds]atomic.Int64
	tracked   [NumKinds]func() int64
	refused   [NumKinds]atomic.Uint64

	mu       sync.Mutex
	reserved int64 // the sum of used
	clients  map[string]int64
}

// New returns a budget of total bytes, of which one client may hold
// total/DefaultClientShare.
func New(total int64) *Budget {
	return &Budget{total: total, perClient: total / DefaultClientShare, clients: make(map[string]int64)}
}

// Total returns the budget's bound in bytes, or 0 for a nil budget.
func (b *Budget) Total() int64 {
	if b == nil {
		return 0
	}
	return b.total
}

// Track counts what used returns as the bytes of kind k: memory bounded
// elsewhere, which the budget counts but does not refuse. Call it before
// the budget is used.
func (b *Budget) Track(k Kind, used func() int64) {
	if b != nil {
		b.tracked[k] = used
	}
}

// Used returns the bytes counted for kind k.
func (b *Budget) Used(k Kind) int64 {
	if b == nil {
		return 0
	}
	n := b.used[k].Load()
	if f := b.tracked[k]; f != nil {
		n += f()
	}
	return n
}

// InUse returns the bytes counted for every kind.
func (b *Budget) InUse() int64 {
	var n int64
	for k := range NumKinds {
		n += b.Used(k)
	}
	return n
}

// Refused returns how many reservations of kind k the budget refused.
func (b *Budget) Refused(k Kind) uint64 {
	if b == nil {
		return 0
	}
	return b.refused[k].Load()
}

// Reserve counts n more bytes for kind k and reports whether they fit in
// the budget; when they do not, nothing is counted.
func (b *Budget) Reserve(k Kind, n int64) bool { return b.ReserveFor("", k, n) == nil }

// ErrOverBudget and ErrOverShare are the refusals of ReserveFor.
var (
	// ErrOverBudget says the bytes do not fit in the budget.
	ErrOverBudget = errors.New("the server's memory budget is spent")
	// ErrOverShare says the bytes do not fit in the client's fair share.
	ErrOverShare = errors.New("the client holds its fair share of the server's memory budget")
)

// ReserveFor is Reserve for bytes charged to client (the client whose
// request made the server build them): they must also fit in its fair
// share of the budget, else it fails with ErrOverShare; ErrOverBudget when
// they do not fit in the budget. An empty client is no client.
func (b *Budget) ReserveFor(client string, k Kind, n int64) error {
	if b == nil {
		return nil
	}
	var tracked int64
	for _, f := range b.tracked {
		if f != nil {
			tracked += f()
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if client != "" && b.clients[client]+n > b.perClient {
		b.refused[k].Add(1)
		return ErrOverShare
	}
	if b.reserved+tracked+n > b.total {
		b.refused[k].Add(1)
		return ErrOverBudget
	}
	b.reserved += n
	b.used[k].Add(n)
	if client != "" {
		b.clients[client] += n
	}
	return nil
}

// Release returns n bytes of kind k that Reserve counted.
func (b *Budget) Release(k Kind, n int64) { b.ReleaseFor("", k, n) }

// ReleaseFor returns n bytes of kind k that ReserveFor counted for client.
func (b *Budget) ReleaseFor(client string, k Kind, n int64) {
	if b == nil || n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reserved -= n
	b.used[k].Add(-n)
	if client != "" {
		if b.clients[client] -= n; b.clients[client] <= 0 {
			delete(b.clients, client)
		}
	}
}
