package admit

import (
	"fmt"
	"sync"
)

// Slots bounds what is held at once (open watches, calls waiting, distinct
// field masks), in all and by each key (a client, a caller), so that one
// key cannot hold every slot and lock the others out. It is the one
// total-plus-per-key counter of podsapi: the gRPC socket's watches, the
// Kubernetes API's watches (local and passed through), FindPods' waiters
// and the field masks of watches all count with it.
//
// A bound of 0 or less means no bound (0 never refuses everything). A
// key's share is the smaller of its own bound and half the total (Share):
// when an operator lowers the total below what one key may hold, the
// share follows, and one key never takes the slots another needs.
//
// A nil *Slots bounds nothing and counts nothing.
type Slots struct {
	total, perKey int

	mu    sync.Mutex
	held  int
	byKey map[string]int
}

// NewSlots returns slots bounded by total in all and by perKey for each
// key; 0 or less means no bound.
func NewSlots(total, perKey int) *Slots {
	return &Slots{total: max(total, 0), perKey: max(perKey, 0), byKey: make(map[string]int)}
}

// SlotsFull is the refusal of Slots.Acquire: the total is reached, or the
// key's share (Key is then the key).
type SlotsFull struct {
	// Limit is the bound reached: the total, or the key's share.
	Limit int
	// Key is the key whose share is reached; "" when the total is.
	Key string
}

func (e *SlotsFull) Error() string {
	if e.Key != "" {
		return fmt.Sprintf("%s holds its share of %d", e.Key, e.Limit)
	}
	return fmt.Sprintf("all %d slots are held", e.Limit)
}

// Total returns the bound of the slots held in all; 0: none.
func (s *Slots) Total() int {
	if s == nil {
		return 0
	}
	return s.total
}

// Share returns how many slots one key may hold: its own bound, or half
// the total (at least 1) when that is smaller; 0: no bound (no bound of
// its own).
func (s *Slots) Share() int {
	if s == nil {
		return 0
	}
	return Share(s.total, s.perKey)
}

// Share returns the share of one key of slots bounded by total in all and
// by perKey for each key: the smaller of perKey and half the total (at
// least 1). A perKey of 0 or less is no bound of a key's own: 0 is
// returned, and one key may take every slot of the total.
func Share(total, perKey int) int {
	if perKey <= 0 {
		return 0
	}
	if total > 0 {
		return min(perKey, max(total/2, 1))
	}
	return perKey
}

// Acquire takes a slot for key, or returns the *SlotsFull that refuses it.
// release gives the slot back; it may be called more than once, and
// gives it back once.
func (s *Slots) Acquire(key string) (release func(), err error) {
	if s == nil {
		return func() {}, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.total > 0 && s.held >= s.total {
		return nil, &SlotsFull{Limit: s.total}
	}
	if share := s.Share(); share > 0 && s.byKey[key] >= share {
		return nil, &SlotsFull{Limit: share, Key: key}
	}
	s.held++
	s.byKey[key]++
	return sync.OnceFunc(func() { s.release(key) }), nil
}

// release gives back a slot of key.
func (s *Slots) release(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held--
	if s.byKey[key]--; s.byKey[key] <= 0 {
		delete(s.byKey, key)
	}
}

// Held returns the slots held now, in all.
func (s *Slots) Held() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// HeldBy returns the slots key holds now.
func (s *Slots) HeldBy(key string) int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byKey[key]
}

// ByKey calls f for each key holding slots, with their number, while the
// lock of s is held: f must not call s.
func (s *Slots) ByKey(f func(key string, n int)) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, n := range s.byKey {
		f(k, n)
	}
}
