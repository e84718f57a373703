package admit

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// TestKeyedLimiterRefill: each key has its own bucket, refilled at its
// rate, on synctest's clock.
func TestKeyedLimiterRefill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewKeyedLimiter(2, 4)
		allowed := func(key string, n int) int {
			got := 0
			for range n {
				if l.Allow(key) {
					got++
				}
			}
			return got
		}
		if got := allowed("a", 10); got != 4 {
			t.Fatalf("a's burst: %d allowed, want 4", got)
		}
		if got := allowed("b", 10); got != 4 {
			t.Fatalf("b after a spent its bucket: %d allowed, want its own burst, 4", got)
		}
		time.Sleep(time.Second)
		if got := allowed("a", 10); got != 2 {
			t.Fatalf("a one second later: %d allowed, want 2", got)
		}
		time.Sleep(time.Hour)
		if got := allowed("a", 10); got != 4 {
			t.Fatalf("a an hour later: %d allowed, want its burst, 4", got)
		}
	})
}

// TestKeyedLimiterBound: past its bound of keys, a new key is refused
// while every bucket kept is in use, and the keys kept are not; once a
// bucket is full again, it is forgotten and the new key served.
func TestKeyedLimiterBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const bound = 8
		l := NewKeyedLimiter(1, 2, WithMaxKeys(bound))
		for i := range 10 * bound {
			l.Allow(fmt.Sprint("flood-", i))
		}
		if n := l.Keys(); n != bound {
			t.Fatalf("%d keys kept, want the bound, %d", n, bound)
		}
		if l.Allow("new") {
			t.Fatal("a new key was served with every bucket of the bound in use")
		}
		if !l.Allow("flood-0") {
			t.Fatal("a key kept was refused its own token")
		}
		time.Sleep(2 * time.Second) // Every bucket is full again.
		if !l.Allow("new") {
			t.Fatal("a new key was refused once the buckets kept had refilled")
		}
		if n := l.Keys(); n > bound {
			t.Fatalf("%d keys kept, want at most %d", n, bound)
		}
	})
}

// TestNilKeyedLimiter: no rate is no limit.
func TestNilKeyedLimiter(t *testing.T) {
	for _, l := range []*KeyedLimiter{NewKeyedLimiter(0, 10), NewFairShareLimiter(-1, 10)} {
		if l != nil {
			t.Fatalf("a limiter of no rate: %+v, want nil", l)
		}
		for range 100 {
			if !l.Allow("a") {
				t.Fatal("nil limiter refused")
			}
		}
	}
}
