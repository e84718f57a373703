package bench

import (
	"regexp"
	"strings"
	"testing"
)

func TestWriteSummary(t *testing.T) {
	r := &Results{Seconds: 93, Targets: []Target{
		{Name: "ListPods 110 full: median ÷ A", Status: "MET"},
		{Name: "paced GetPod: median ÷ A", Status: "MISSED"},
		{Name: "Idle: marginal RSS of one idle watcher (KiB)", Status: "NOT MEASURED"},
	}}
	var b strings.Builder
	writeSummary(&b, r, Options{Quick: true, MD: "build/benchmarks.md", JSON: "build/bench-results.json"})
	got := b.String()
	for _, want := range []string{
		"Summary: 1 of 3 targets met, 1 missed, 1 not measured (93 s).",
		"Missed: paced GetPod: median ÷ A.",
		"make bench measures it",
		"Written: report build/benchmarks.md, results build/bench-results.json.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary %q does not say %q", got, want)
		}
	}
	if regexp.MustCompile(`(?i)issues? \d`).MatchString(got) {
		t.Errorf("summary %q names issues", got)
	}
}
