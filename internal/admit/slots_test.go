package admit_test

import (
	"errors"
	"testing"

	"github.com/podsapi/podsapi/internal/admit"
)

// TestSlots: what each key and all may hold, with the share following the
// total when it is the smaller.
func TestSlots(t *testing.T) {
	tests := []struct {
		name          string
		total, perKey int
		// takes are the keys acquiring, in order; want how many of each
		// key's were granted.
		takes     []string
		want      map[string]int
		wantShare int
	}{
		{"PerKeyBound", 100, 3, []string{"a", "a", "a", "a", "b"}, map[string]int{"a": 3, "b": 1}, 3},
		{"TotalBound", 4, 3, []string{"a", "a", "b", "b", "c", "c"}, map[string]int{"a": 2, "b": 2}, 2},
		{"ShareFollowsALowerTotal", 40, 1000, repeat("a", 40, "b"), map[string]int{"a": 20, "b": 1}, 20},
		{"ShareOfATotalOfOne", 1, 1000, []string{"a", "b"}, map[string]int{"a": 1}, 1},
		{"ZeroTotalIsNoBound", 0, 2, []string{"a", "a", "a", "b"}, map[string]int{"a": 2, "b": 1}, 2},
		{"ZeroShareIsNoBound", 6, 0, repeat("a", 6, "b"), map[string]int{"a": 6}, 0},
		{"NoBoundAtAll", -1, -1, repeat("a", 50, "b"), map[string]int{"a": 50, "b": 1}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := admit.NewSlots(tt.total, tt.perKey)
			if got := s.Share(); got != tt.wantShare {
				t.Fatalf("Share() = %d, want %d", got, tt.wantShare)
			}
			got := map[string]int{}
			for _, k := range tt.takes {
				_, err := s.Acquire(k)
				var full *admit.SlotsFull
				switch {
				case err == nil:
					got[k]++
				case !errors.As(err, &full):
					t.Fatalf("Acquire(%q): %v, want a *SlotsFull", k, err)
				case full.Key != "" && (full.Key != k || full.Limit != s.Share()):
					t.Fatalf("Acquire(%q) refused with %+v, want the key's share %d", k, full, s.Share())
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("granted %v, want %v", got, tt.want)
			}
			for k, n := range tt.want {
				if got[k] != n || s.HeldBy(k) != n {
					t.Fatalf("granted %v (held by %s: %d), want %v", got, k, s.HeldBy(k), tt.want)
				}
			}
		})
	}
}

// TestSlotsRelease: a slot given back is taken again, and a release called
// twice gives back one slot.
func TestSlotsRelease(t *testing.T) {
	s := admit.NewSlots(2, 0)
	r1, err := s.Acquire("a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire("b"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire("c"); err == nil {
		t.Fatal("a third slot of two granted")
	}
	r1()
	r1()
	if n := s.Held(); n != 1 {
		t.Fatalf("Held() after one release called twice = %d, want 1", n)
	}
	if _, err := s.Acquire("c"); err != nil {
		t.Fatalf("the slot given back: %v", err)
	}
	if _, err := s.Acquire("c"); err == nil {
		t.Fatal("a slot granted beyond the total after a double release")
	}
	var keys []string
	s.ByKey(func(k string, n int) { keys = append(keys, k) })
	if len(keys) != 2 {
		t.Fatalf("ByKey: %v, want b and c", keys)
	}
}

// TestNilSlots: nil slots bound nothing.
func TestNilSlots(t *testing.T) {
	var s *admit.Slots
	release, err := s.Acquire("a")
	if err != nil {
		t.Fatal(err)
	}
	release()
	if s.Held() != 0 || s.Share() != 0 || s.Total() != 0 {
		t.Fatal("nil slots count")
	}
}

// repeat returns n times k, then the others.
func repeat(k string, n int, others ...string) []string {
	var out []string
	for range n {
		out = append(out, k)
	}
	return append(out, others...)
}
