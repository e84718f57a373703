package main

import (
	"math"
	"strings"
	"testing"
)

// TestCompare checks the arithmetic of the ratios on made-up rounds: the
// rounds are paired in order, the median, lowest and highest ratio taken,
// and a measurement one side lacks, or whose old value is 0, left out.
func TestCompare(t *testing.T) {
	olds := []results{{"a: b: µs": 100, "b: µs": 10, "gone: µs": 1, "zero: µs": 0}, {"a: b: µs": 200, "b: µs": 10}, {"a: b: µs": 100, "b: µs": 20}}
	news := []results{{"a: b: µs": 110, "b: µs": 5, "zero: µs": 3}, {"a: b: µs": 180, "b: µs": 10}, {"a: b: µs": 100, "b: µs": 10}}
	got := compare(olds, news)
	want := []ratio{
		{name: "a: b: µs", median: 1.0, min: 0.9, max: 1.1, rounds: 3},
		{name: "b: µs", median: 0.5, min: 0.5, max: 1.0, rounds: 3},
	}
	if len(got) != len(want) {
		t.Fatalf("compare = %+v, want %+v", got, want)
	}
	for i, w := range want {
		g := got[i]
		if g.name != w.name || g.rounds != w.rounds || !near(g.median, w.median) || !near(g.min, w.min) || !near(g.max, w.max) {
			t.Errorf("ratio %d = %+v, want %+v", i, g, w)
		}
	}
	var b strings.Builder
	writeTable(&b, got)
	if !strings.Contains(b.String(), "| **all µs** (median of 2) | **0.75** | 0.50 – 1.00 | |") {
		t.Errorf("table has no summary of the µs measurements:\n%s", b.String())
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
