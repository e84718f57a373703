package admit

import (
	"testing"
	"time"
)

// TestFairShare: the buckets of NewFairShareLimiter (100 a second, a burst
// of 10) on a clock the test moves.
func TestFairShare(t *testing.T) {
	const a, b, c = "uid/1000", "uid/1001", "uid/1002"
	type step struct {
		at    time.Duration // since the start
		who   string
		calls int
		want  int // of the calls, those allowed
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"AloneNotLimited", []step{{0, a, 50, 50}, {10 * time.Millisecond, a, 50, 50}}},
		{"TwoClientsHalfTheBurstEach", []step{{0, b, 1, 1}, {0, a, 10, 5}, {0, b, 10, 5}}}, // b's first call, alone, took nothing of its bucket
		{"TwoClientsHalfTheRate", []step{{0, b, 1, 1}, {0, a, 5, 5}, {100 * time.Millisecond, a, 10, 5}}},
		{"ThreeClientsAThirdEach", []step{{0, b, 1, 1}, {0, c, 1, 1}, {0, a, 10, 3}}},
		{"AloneAgainOnceTheOtherStops", []step{{0, b, 1, 1}, {0, a, 10, 5}, {fairWindow, a, 50, 50}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Unix(1e9, 0)
			now := start
			l := NewFairShareLimiter(100, 10)
			l.now = func() time.Time { return now }
			for i, s := range tt.steps {
				now = start.Add(s.at)
				got := 0
				for range s.calls {
					if l.Allow(s.who) {
						got++
					}
				}
				if got != s.want {
					t.Fatalf("step %d (%v, %s, %d calls): %d allowed, want %d", i, s.at, s.who, s.calls, got, s.want)
				}
			}
		})
	}
}
