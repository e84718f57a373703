package loglimit_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/podsapi/podsapi/internal/loglimit"
)

// TestAllow: one line per key every interval, the refused ones reported by
// the next line allowed for the same key.
func TestAllow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := loglimit.New[string](time.Second)
		allowed := map[string]int{}
		for range 100 {
			for _, k := range []string{"a", "b"} {
				if ok, _ := l.Allow(k); ok {
					allowed[k]++
				}
			}
		}
		if allowed["a"] != 1 || allowed["b"] != 1 {
			t.Fatalf("allowed %v within one interval, want one line per key", allowed)
		}
		time.Sleep(time.Second)
		ok, suppressed := l.Allow("a")
		if !ok || suppressed != 99 {
			t.Fatalf("after the interval: Allow = %v, suppressed %d; want true, 99", ok, suppressed)
		}
	})
}

// TestMaxKeys: the keys remembered are bounded; old keys make room.
func TestMaxKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := loglimit.New[int](time.Second)
		for i := range loglimit.MaxKeys {
			l.Allow(i)
		}
		if ok, _ := l.Allow(-1); ok {
			t.Fatal("a new key was allowed with the table full of keys within their interval")
		}
		time.Sleep(time.Second)
		if ok, _ := l.Allow(-1); !ok {
			t.Fatal("a new key was refused after every remembered key's interval had passed")
		}
	})
}
