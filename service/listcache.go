package service

import "sync"

// maxListViews bounds the number of encoded ListPods responses kept for one
// store version: one per distinct field mask, the whole-pod list included.
const maxListViews = 16

// listCache keeps the encoded ListPods responses of the current store
// version, one per field mask, so that clients polling an unchanged node
// cost a copy, not an assembly. A new store version empties it.
type listCache struct {
	mu      sync.Mutex
	version uint64
	entries map[string]*listEntry
}

// listEntry is one encoded response, built once.
type listEntry struct {
	once sync.Once
	b    []byte
	err  error
}

// get returns the response of version for mask key, building it with build
// at most once per version and key while fewer than maxListViews are cached.
// It reports whether the response was built by this call.
func (c *listCache) get(version uint64, key string, build func() ([]byte, error)) (b []byte, built bool, err error) {
	c.mu.Lock()
	if c.version != version || c.entries == nil {
		c.version = version
		c.entries = make(map[string]*listEntry)
	}
	e, ok := c.entries[key]
	if !ok && len(c.entries) < maxListViews {
		e = &listEntry{}
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
	})
	return e.b, built, e.err
}
