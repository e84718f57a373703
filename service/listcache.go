package service

import (
	"sync"

	"github.com/podsapi/podsapi/budget"
)

// maxListViews bounds the number of encoded ListPods responses kept for one
// store version: one per distinct field mask, the whole-pod list included.
const maxListViews = 16

// listCache keeps the encoded ListPods responses of the current store
// version, one per field mask, so that clients polling an unchanged node
// cost a copy, not an assembly. A new store version empties it. Its bytes
// are counted against the memory budget, charged to the client whose call
// built them: a response that does not fit is built for its call alone.
type listCache struct {
	mu      sync.Mutex
	version uint64
	entries map[string]*listEntry
	budget  *budget.Budget
}

// listEntry is one encoded response, built once.
type listEntry struct {
	once sync.Once
	b    []byte
	err  error
	// client is charged bytes for b (0: not counted, or not yet).
	client string
	bytes  int64
}

// get returns the response of version for mask key, building it with build
// at most once per version and key while fewer than maxListViews are cached
// and the budget has room for them. It reports whether the response was
// built by this call.
func (c *listCache) get(version uint64, key, client string, build func() ([]byte, error)) (b []byte, built bool, err error) {
	c.mu.Lock()
	if c.version != version || c.entries == nil {
		c.releaseAll()
		c.version = version
		c.entries = make(map[string]*listEntry)
	}
	e, ok := c.entries[key]
	if !ok && len(c.entries) < maxListViews {
		e = &listEntry{client: client}
		c.entries[key] = e
		ok = true
	}
	c.mu.Unlock()
	if !ok {
		b, err = build()
		return b, true, err
	}
	e.once.Do(func() {
		built = true
		e.b, e.err = build()
		c.count(version, key, e)
	})
	return e.b, built, e.err
}

// count charges the bytes of e, just built, to its client, or stops caching
// it when they do not fit.
func (c *listCache) count(version uint64, key string, e *listEntry) {
	n := int64(cap(e.b))
	fits := e.err == nil && c.budget.ReserveFor(e.client, budget.Lists, n) == nil
	c.mu.Lock()
	defer c.mu.Unlock()
	if fits && c.version == version && c.entries[key] == e {
		e.bytes = n
		return
	}
	if c.version == version && c.entries[key] == e {
		delete(c.entries, key)
	}
	if fits {
		c.budget.ReleaseFor(e.client, budget.Lists, n)
	}
}

// releaseAll returns the bytes of every entry to the budget. c.mu is held.
func (c *listCache) releaseAll() {
	for _, e := range c.entries {
		c.budget.ReleaseFor(e.client, budget.Lists, e.bytes)
		e.bytes = 0
	}
}
