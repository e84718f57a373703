package store

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Defaults of WithDeletedPods.
const (
	// DefaultDeletedRetention is how long a deleted pod stays findable.
	DefaultDeletedRetention = 5 * time.Minute
	// DefaultDeletedPods is the number of deleted pods the store keeps.
	DefaultDeletedPods = 1000
	// DefaultDeletedPodsBytes bounds the memory of those pods (as counted by
	// tombstoneSize).
	DefaultDeletedPodsBytes = 16 << 20
)

// tombstoneOverhead is what one deleted pod costs beside the encoding of
// its last version: the tombstone, its index entries and its slot, rounded
// up.
const tombstoneOverhead = 512

// WithDeletedPods sets how long the store keeps the last version of a
// deleted pod for FindContainer, FindIP and FindPod (with deleted set): for
// retention, and at most count pods whose encodings and overhead add up to
// at most bytes, the oldest deletions going first. The defaults are
// DefaultDeletedRetention, DefaultDeletedPods and DefaultDeletedPodsBytes,
// which 0 keeps (the zero rule of package source); a negative value for any
// of them keeps no deleted pod.
func WithDeletedPods(retention time.Duration, count int, bytes int64) Option {
	return func(s *Store) {
		s.tombs.retention = pick(retention, DefaultDeletedRetention)
		s.tombs.maxCount = pick(count, DefaultDeletedPods)
		s.tombs.maxBytes = pick(bytes, DefaultDeletedPodsBytes)
	}
}

// pick returns v when positive, def when 0, and 0 when negative.
func pick[T int | int64 | time.Duration](v, def T) T {
	switch {
	case v < 0:
		return 0
	case v == 0:
		return def
	default:
		return v
	}
}

// tombstones are the deleted pods the store keeps, oldest deletion first.
// The store's mu guards them.
type tombstones struct {
	retention time.Duration
	maxCount  int
	maxBytes  int64

	queue []*tombstone
	byUID map[types.UID]*tombstone
	bytes int64
}

// tombstone is the last version of a deleted pod.
type tombstone struct {
	pod *Pod
	// at is when the pod was deleted, version the store version of its
	// deletion.
	at      time.Time
	version uint64
	// dropped says the tombstone left the queue (it is skipped there until
	// compacted).
	dropped bool
}

func newTombstones() tombstones {
	return tombstones{
		retention: DefaultDeletedRetention, maxCount: DefaultDeletedPods, maxBytes: DefaultDeletedPodsBytes,
		byUID: make(map[types.UID]*tombstone),
	}
}

// tombstoneSize is what a deleted pod counts against the bytes of the
// tombstones.
func tombstoneSize(p *Pod) int64 { return int64(len(p.raw)) + tombstoneOverhead }

// match returns the match of t naming container.
func (t *tombstone) match(container string) Match {
	return Match{Pod: t.pod, Container: container, Deleted: true, HostNetwork: t.pod.fields.HostNetwork(), deletion: t.version}
}

// bury keeps p, the last version of a pod deleted at the store's version,
// findable as deleted, dropping the oldest deletions beyond the bounds.
// s.mu is held; p has left s.pods and the index of live pods.
func (s *Store) bury(p *Pod) {
	ts := &s.tombs
	size := tombstoneSize(p)
	if ts.retention == 0 || ts.maxCount == 0 || size > ts.maxBytes {
		return
	}
	s.expireTombstones()
	for len(ts.byUID) > 0 && (len(ts.byUID) >= ts.maxCount || ts.bytes+size > ts.maxBytes) {
		s.dropTombstone(ts.oldest())
	}
	t := &tombstone{pod: p, at: time.Now(), version: s.version}
	ts.queue = append(ts.queue, t)
	ts.byUID[p.UID] = t
	ts.bytes += size
	s.index.add(p.UID, p.keys, t)
}

// oldest returns the oldest tombstone kept; there is one.
func (ts *tombstones) oldest() *tombstone {
	for ts.queue[0].dropped {
		ts.queue[0] = nil
		ts.queue = ts.queue[1:]
	}
	return ts.queue[0]
}

// expireTombstones drops the deleted pods kept longer than the retention.
// s.mu is held.
func (s *Store) expireTombstones() {
	ts := &s.tombs
	now := time.Now()
	for len(ts.byUID) > 0 {
		t := ts.oldest()
		if now.Sub(t.at) < ts.retention {
			return
		}
		s.dropTombstone(t)
	}
}

// dropTombstone forgets t. s.mu is held.
func (s *Store) dropTombstone(t *tombstone) {
	ts := &s.tombs
	t.dropped = true
	delete(ts.byUID, t.pod.UID)
	ts.bytes -= tombstoneSize(t.pod)
	s.index.remove(t.pod.UID, t.pod.keys, t)
	if len(ts.byUID) == 0 {
		clear(ts.queue)
		ts.queue = ts.queue[:0]
	} else if len(ts.queue) > 2*len(ts.byUID)+16 {
		// Tombstones dropped out of order (their pod came back) are
		// compacted away, so that the queue stays bounded by the count.
		kept := ts.queue[:0]
		for _, q := range ts.queue {
			if !q.dropped {
				kept = append(kept, q)
			}
		}
		clear(ts.queue[len(kept):])
		ts.queue = kept
	}
}

// DeletedLen returns the number of deleted pods the store keeps findable
// and the bytes they count against their bound, after dropping those kept
// longer than the retention.
func (s *Store) DeletedLen() (pods int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireTombstones()
	return len(s.tombs.byUID), s.tombs.bytes
}
