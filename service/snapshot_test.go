package service

import "testing"

// TestSnapshotCacheRelease checks the holds of the snapshots in flight: a
// snapshot is shared while held and dropped with its bytes by the last
// release, and the release of an older version's snapshot leaves the newer
// version's alone.
func TestSnapshotCacheRelease(t *testing.T) {
	var c snapshotCache
	builds := 0
	build := func(reserve func(int) bool) (*envelopedSnapshot, error) {
		builds++
		if !reserve(100) {
			return nil, nil
		}
		return &envelopedSnapshot{first: []byte{1}}, nil
	}
	check := func(count, bytes int) {
		t.Helper()
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.count != count || c.bytes != bytes || len(c.entries) > count {
			t.Fatalf("%d snapshots in flight (%d shared) of %d bytes, want %d of %d", c.count, len(c.entries), c.bytes, count, bytes)
		}
	}

	s1, built, release1, err := c.get(1, "k", build)
	if s1 == nil || !built || err != nil {
		t.Fatalf("first get: %v, built %v, %v", s1, built, err)
	}
	s, built, release, _ := c.get(1, "k", build)
	if s != s1 || built {
		t.Fatalf("second get of a held snapshot: built %v, shared %v", built, s == s1)
	}
	release()
	release() // a second call of one release is a no-op
	check(1, 100)

	// A newer version: its own entry of the same key, while the older
	// one is still held.
	s2, built, release2, _ := c.get(2, "k", build)
	if s2 == nil || s2 == s1 || !built {
		t.Fatalf("get of version 2: built %v, same as version 1 %v", built, s2 == s1)
	}
	check(2, 200)
	// An older version than the latest is not shared.
	if s, _, release, _ := c.get(1, "k", build); s != nil {
		t.Fatal("a watch of an older version got a shared snapshot")
	} else {
		release()
	}
	release1()
	check(1, 100)
	if s, built, release, _ := c.get(2, "k", build); s != s2 || built {
		t.Fatalf("version 2's snapshot after version 1's release: built %v, shared %v", built, s == s2)
	} else {
		release()
	}
	release2()
	check(0, 0)
	if _, built, release, _ := c.get(2, "k", build); !built {
		t.Fatal("a snapshot no one held was not built again")
	} else {
		release()
	}
	check(0, 0)

	// The bound counts the snapshots in flight; a release makes room.
	var releases []func()
	for i := range maxSnapshots {
		_, _, release, _ := c.get(3, string(rune('a'+i)), build)
		releases = append(releases, release)
	}
	if s, _, release, _ := c.get(3, "over", build); s != nil {
		t.Fatal("a snapshot beyond maxSnapshots in flight")
	} else {
		release()
	}
	releases[0]()
	if s, built, release, _ := c.get(3, "over", build); s == nil || !built {
		t.Fatal("no snapshot built once one in flight was released")
	} else {
		release()
	}
	for _, release := range releases[1:] {
		release()
	}
	check(0, 0)
	if builds != 4+maxSnapshots {
		t.Fatalf("%d builds, want %d", builds, 4+maxSnapshots)
	}
}
