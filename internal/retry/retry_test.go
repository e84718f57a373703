package retry_test

import (
	"testing"
	"time"

	"github.com/podsapi/podsapi/internal/retry"
)

func TestBackoff(t *testing.T) {
	b := retry.NewBackoff(100*time.Millisecond, time.Second)
	steps := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for round := range 2 {
		for i, base := range steps {
			base *= time.Millisecond
			if d := b.Next(); d < base || d > base*3/2 {
				t.Fatalf("round %d, wait %d = %v, want within [%v, %v]", round, i, d, base, base*3/2)
			}
		}
		b.Reset()
	}
}
