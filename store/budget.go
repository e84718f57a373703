package store

import (
	"unsafe"

	"github.com/podsapi/podsapi/budget"
)

// WithBudget has the store count against b what it keeps on behalf of its
// clients: its history of changes, the events queued for watchers, and the
// views its pods cache (masked pods, enveloped events), which are not cached
// beyond it. The server's caches count against the same budget (Budget).
// The default is budget.New(budget.Bytes(budget.Limit())): half the
// runtime's memory limit, 512 MiB without one. A nil b counts nothing.
func WithBudget(b *budget.Budget) Option {
	return func(s *Store) { s.budget = b }
}

// Budget returns the memory budget the store counts against (WithBudget),
// or nil for none.
func (s *Store) Budget() *budget.Budget { return s.budget }

// queuedBytes returns what the events queued for watchers cost: a slot
// each (the pods they hold are those of the history, or current).
func (s *Store) queuedBytes() int64 { return s.queued.Load() * queuedEventBytes }

// queuedEventBytes is what one queued event costs.
const queuedEventBytes = int64(unsafe.Sizeof(Event{}))
