package stress

import (
	"testing"
	"time"
)

// TestVictimRows checks the victim's two thresholds: at least 99% served,
// and a p99 under the attack within 3x of the quiet one, 1 ms at least.
func TestVictimRows(t *testing.T) {
	ms := func(ds ...int) []time.Duration {
		var out []time.Duration
		for _, d := range ds {
			out = append(out, time.Duration(d)*time.Millisecond)
		}
		return out
	}
	stats := func(ok, failed int, lat []time.Duration) victimStats {
		return victimStats{OK: ok, Failed: failed, Latencies: lat}
	}
	for _, tc := range []struct {
		name         string
		quiet, under victimStats
		served, p99  bool
	}{
		{"all served, as fast", stats(3, 0, ms(2, 2, 2)), stats(3, 0, ms(2, 2, 2)), true, true},
		{"99 of 100 served", stats(1, 0, ms(2)), stats(99, 1, ms(2)), true, true},
		{"98 of 100 served", stats(1, 0, ms(2)), stats(98, 2, ms(2)), false, true},
		{"nothing called", stats(1, 0, ms(2)), stats(0, 0, nil), false, false},
		{"3x slower", stats(1, 0, ms(4)), stats(1, 0, ms(12)), true, true},
		{"more than 3x slower", stats(1, 0, ms(4)), stats(1, 0, ms(13)), true, false},
		{"under the 1 ms floor", stats(1, 0, []time.Duration{100 * time.Microsecond}), stats(1, 0, ms(3)), true, true},
		{"over the floor", stats(1, 0, []time.Duration{100 * time.Microsecond}), stats(1, 0, ms(4)), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := &Report{}
			victimRows(rep, "s", victimOutcome{Lists: tc.quiet, Watches: tc.quiet}, victimOutcome{Lists: tc.under, Watches: tc.under}, "")
			if len(rep.Rows) != 4 {
				t.Fatalf("%d rows, want 4", len(rep.Rows))
			}
			for i, row := range rep.Rows {
				want := tc.served
				if i%2 == 1 {
					want = tc.p99
				}
				if row.OK != want {
					t.Errorf("%s: ok %v, want %v (%s)", row.Check, row.OK, want, row.Value)
				}
			}
		})
	}
}

// TestMergeStats checks that two phases add up.
func TestMergeStats(t *testing.T) {
	a := victimStats{OK: 2, Failed: 1, Latencies: []time.Duration{1, 2}}
	b := victimStats{OK: 1, Failed: 1, FirstErr: "refused", Latencies: []time.Duration{3}}
	got := mergeStats(a, b)
	if got.OK != 3 || got.Failed != 2 || got.FirstErr != "refused" || len(got.Latencies) != 3 {
		t.Errorf("mergeStats = %+v", got)
	}
}
