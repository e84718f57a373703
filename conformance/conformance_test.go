package conformance_test

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/podsapi/podsapi/conformance"
	"github.com/podsapi/podsapi/conformance/testimpl"
)

// start starts an in-process implementation with brk broken, stopped at the
// end of the test.
func start(t *testing.T, brk testimpl.Break) *testimpl.Impl {
	t.Helper()
	im, err := testimpl.New(brk, t.Output())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { im.Close() })
	if err := im.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return im
}

func features(im *testimpl.Impl) conformance.Features {
	f := conformance.DefaultFeatures()
	f.RateLimit = conformance.RateLimit{QPS: im.QPS, Burst: testimpl.Burst}
	f.WatchQueue = testimpl.WatchQueue
	f.Reflection, f.Health = true, true
	return f
}

func config(im *testimpl.Impl, run string) conformance.Config {
	cfg := conformance.Config{
		Endpoint: "unix://" + im.Socket, ManifestDir: im.ManifestDir, MetricsURL: im.MetricsURL,
		Features: features(im), CaseTimeout: 45 * time.Second, StartTimeout: 10 * time.Second, EventTimeout: 15 * time.Second,
	}
	if run != "" {
		cfg.Run = regexp.MustCompile(run)
	}
	return cfg
}

// runCases runs the suite and returns its report, failing on a harness
// error.
func runCases(t *testing.T, cfg conformance.Config) *conformance.Report {
	t.Helper()
	var log bytes.Buffer
	cfg.Log = &log
	rep, err := conformance.RunCases(t.Context(), cfg)
	t.Log(log.String())
	if err != nil {
		t.Fatalf("RunCases: %v", err)
	}
	return rep
}

// TestReference runs the whole suite against the reference implementation,
// in process, lifecycle included, through Run: everything passes.
func TestReference(t *testing.T) {
	if testing.Short() {
		t.Skip("the whole suite takes a few seconds")
	}
	im := start(t, testimpl.None)
	cfg := config(im, "")
	cfg.Lifecycle = im
	conformance.Run(t, cfg)
}

// TestBroken runs the suite against implementations that each break one
// behaviour: the cases that check it fail, others pass.
func TestBroken(t *testing.T) {
	for _, tc := range []struct {
		brk       testimpl.Break
		lifecycle bool
		run       string
		mustFail  []string
		mustPass  []string
	}{
		{testimpl.UnsyncedAnswers, true, "^Readiness/Startup$|^GetPod/UnknownUID$", []string{"Readiness/Startup"}, []string{"GetPod/UnknownUID"}},
		{testimpl.IgnoreFieldMasks, false, "FieldMask|^ListPods/Pods$",
			[]string{"ListPods/FieldMask/Scalar", "GetPod/FieldMask/Map", "ListPods/FieldMask/Binary", "ListPods/FieldMask/InvalidPath", "GetPod/FieldMask/InvalidPath", "WatchPods/FieldMask/InvalidPath", "WatchPods/FieldMask/Projection", "WatchPods/FieldMask/UnmaskedChange"},
			[]string{"ListPods/Pods", "ListPods/FieldMask/None", "GetPod/FieldMask/None"}},
		{testimpl.NeverDrop, false, "^WatchPods/(SlowConsumer|Events)$", []string{"WatchPods/SlowConsumer"}, []string{"WatchPods/Events"}},
		{testimpl.UnknownForMissing, false, "^GetPod/", []string{"GetPod/UnknownUID"}, []string{"GetPod/EmptyUID", "GetPod/Pod", "GetPod/FieldMask/Scalar"}},
		{testimpl.NoSyncMarker, false, "^WatchPods/(InitialSnapshot|Events)$|^GetPod/EmptyUID$", []string{"WatchPods/InitialSnapshot", "WatchPods/Events"}, []string{"GetPod/EmptyUID"}},
		{testimpl.RateLimitedWatches, false, "^WatchPods/NotRateLimited$|^RateLimit/ListPods$", []string{"WatchPods/NotRateLimited"}, []string{"RateLimit/ListPods"}},
		{testimpl.SeparateBuckets, false, "^RateLimit/(Shared|GetPod)$", []string{"RateLimit/Shared"}, []string{"RateLimit/GetPod"}},
	} {
		t.Run(string(tc.brk), func(t *testing.T) {
			t.Parallel()
			im := start(t, tc.brk)
			cfg := config(im, tc.run)
			if tc.lifecycle {
				cfg.Lifecycle = im
			}
			rep := runCases(t, cfg)
			for _, id := range tc.mustFail {
				if res, ok := rep.Result(id); !ok || res.Status != conformance.Failed {
					t.Errorf("%s: %s, want FAILED: %s", id, res.Status, res.Message)
				}
			}
			for _, id := range tc.mustPass {
				if res, ok := rep.Result(id); !ok || res.Status != conformance.Passed {
					t.Errorf("%s: %s, want PASSED: %s", id, res.Status, res.Message)
				}
			}
		})
	}
}

// TestSkips checks that cases without their driver, lifecycle or metrics
// are skipped with the reason, never passed.
func TestSkips(t *testing.T) {
	im := start(t, testimpl.None)
	cfg := config(im, "^(ListPods/Pods|Readiness/Startup|Metrics/Names|Health/Serving|GetPod/EmptyUID)$")
	cfg.ManifestDir, cfg.MetricsURL = "", ""
	cfg.Features.Health = false
	rep := runCases(t, cfg)
	for id, reason := range map[string]string{
		"ListPods/Pods":     "--manifest-dir",
		"Readiness/Startup": "--server-cmd",
		"Metrics/Names":     "--metrics-url",
		"Health/Serving":    "health",
	} {
		res, _ := rep.Result(id)
		if res.Status != conformance.Skipped || !bytes.Contains([]byte(res.Message), []byte(reason)) {
			t.Errorf("%s: %s %q, want SKIPPED mentioning %s", id, res.Status, res.Message, reason)
		}
	}
	if res, _ := rep.Result("GetPod/EmptyUID"); res.Status != conformance.Passed {
		t.Errorf("GetPod/EmptyUID: %s %s", res.Status, res.Message)
	}
}

// TestKnownFailing checks that a known-failing case that fails does not
// fail the run, and one that passes does.
func TestKnownFailing(t *testing.T) {
	im := start(t, testimpl.UnknownForMissing)
	cfg := config(im, "^GetPod/(UnknownUID|EmptyUID)$")
	cfg.KnownFailing = []string{"GetPod/UnknownUID", "GetPod/EmptyUID"}
	rep := runCases(t, cfg)
	if res, _ := rep.Result("GetPod/UnknownUID"); res.Status != conformance.KnownFailure {
		t.Errorf("GetPod/UnknownUID: %s, want KNOWN-FAILURE", res.Status)
	}
	if res, _ := rep.Result("GetPod/EmptyUID"); res.Status != conformance.Failed {
		t.Errorf("GetPod/EmptyUID (listed, passes): %s, want FAILED", res.Status)
	}
	cfg.KnownFailing = []string{"No/Such/Case"}
	if _, err := conformance.RunCases(t.Context(), cfg); err == nil {
		t.Errorf("an unknown known-failing ID is not a harness error")
	}
}

// TestUnreachable checks that an implementation that never answers is a
// harness error.
func TestUnreachable(t *testing.T) {
	dir, err := os.MkdirTemp("", "cf")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = conformance.RunCases(ctx, conformance.Config{Endpoint: dir + "/none.sock", StartTimeout: 200 * time.Millisecond})
	if _, ok := err.(*conformance.HarnessError); !ok {
		t.Fatalf("RunCases: %v, want a harness error", err)
	}
}

// TestCasesMarkdown fails when CASES.md is stale: regenerate it with
// go generate ./conformance.
func TestCasesMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := conformance.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("CASES.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, b.Bytes()) {
		t.Fatalf("CASES.md is stale: run go generate ./conformance")
	}
}

// TestCaseIDs checks that IDs are unique, hierarchical and have a MUST.
func TestCaseIDs(t *testing.T) {
	seen := map[string]bool{}
	re := regexp.MustCompile(`^[A-Z][A-Za-z]*(/[A-Z][A-Za-z]*)+$`)
	for _, c := range conformance.Cases() {
		if seen[c.ID] || !re.MatchString(c.ID) || !regexp.MustCompile(`MUST`).MatchString(c.Statement) {
			t.Errorf("case %q: duplicate, malformed or without MUST: %s", c.ID, c.Statement)
		}
		seen[c.ID] = true
	}
}
