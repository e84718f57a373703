package service

import (
	"k8s.io/utils/lru"
)

// maskCacheSize is the number of distinct field masks, and of their
// projections, kept parsed: agents on a node send a handful of masks, each
// over and over.
const maskCacheSize = 128

// maxCachedKey is the length in bytes of the longest key kept: a longer
// mask is parsed for its call alone, so that the cache holds at most
// maskCacheSize × maxCachedKey bytes of keys whatever clients send.
const maxCachedKey = 2 << 10

// maskCache keeps the values built from client-sent masks — a parsed mask,
// a projection — by key, so that the clients sending the same mask share
// one value instead of each call or watch building its own: a watch holds
// its masks and projection for as long as it lives (about 2 KiB in all).
// Values must not change once built. Safe for concurrent use.
type maskCache struct{ c *lru.Cache }

func newMaskCache() maskCache { return maskCache{lru.New(maskCacheSize)} }

// get returns the value of key, built by build on a miss. A value build
// fails for is not kept; neither is the value of a key longer than
// maxCachedKey.
func get[V any](m maskCache, key string, build func() (V, error)) (V, error) {
	if v, ok := m.c.Get(key); ok {
		return v.(V), nil
	}
	v, err := build()
	if err == nil && len(key) <= maxCachedKey {
		m.c.Add(key, v)
	}
	return v, err
}
