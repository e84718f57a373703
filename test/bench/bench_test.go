package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	// The harness re-executes its own binary as server children: in a test,
	// that binary is the test binary.
	if child, code := frontDoorChild(); child {
		os.Exit(code)
	}
	if child, code := ChildMain(); child {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestRunTiny runs the whole harness, child processes included, with tiny
// sizes, so that it cannot rot.
func TestRunTiny(t *testing.T) {
	dir := t.TempDir()
	var out, errs bytes.Buffer
	args := []string{
		"--pods", "3,5", "--concurrency", "1,2", "--duration", "50ms", "--min-requests", "2",
		"--watchers", "2", "--watch-pods", "3", "--churn", "50", "--watch-duration", "300ms",
		"--idle-pods", "3", "--idle-watchers", "2", "--decode-time", "1ms", "--selector-pods", "20", "--timeout", "150s",
		"--paced-rate", "50", "--paced-duration", "100ms", "--storm-watchers", "3", "--storm-pods", "3",
		"--wakeup-window", "200ms", "--wakeup-settle", "100ms",
		"--json", filepath.Join(dir, "r.json"), "--svg", filepath.Join(dir, "p.svg"), "--md", filepath.Join(dir, "b.md"),
		// Every section but the footprint, which builds podsapi-server
		// (a minute or two cold): TestFootprint runs it.
		"--only", strings.Join(slices.DeleteFunc(slices.Clone(sections), func(s string) bool { return s == "footprint" }), ","),
	}
	// Generous bounds: the harness starts a dozen child processes, which
	// takes a while on a busy machine.
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	if err := Run(ctx, args, &out, &errs); err != nil {
		t.Fatalf("Run: %v\n%s", err, errs.String())
	}
	var res Results
	b, err := os.ReadFile(filepath.Join(dir, "r.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		op, impl string
		pods     int
	}{
		{"list", ImplOurs, 3}, {"list-masked", ImplOurs, 5}, {"get", ImplOurs, 3},
		{"list", ImplBaselineA, 5}, {"list-masked", ImplBaselineA, 3}, {"get", ImplBaselineA, 5},
		{"list", ImplBaselineB, 3}, {"empty", ImplFloorRPC, 0}, {"raw:list", ImplFloorRaw, 5},
		{"kubelet:list", ImplOurs, 3}, {"kubelet:get", ImplOurs, 5},
	} {
		r := res.row(want.op, want.impl, want.pods, 2)
		if r == nil || r.Requests < 2 || r.MedianUs <= 0 {
			t.Errorf("no measurement of %s %s %d pods: %+v", want.impl, want.op, want.pods, r)
		}
	}
	full, masked, a := res.row("list", ImplOurs, 3, 1), res.row("list-masked", ImplOurs, 3, 1), res.row("list", ImplBaselineA, 3, 1)
	// Ours carries the same pods as A, and its revision (under 64 bytes).
	if full.Bytes < a.Bytes || full.Bytes > a.Bytes+64 || masked.Bytes*5 > full.Bytes {
		t.Errorf("bytes per list: ours %v, A %v, masked %v", full.Bytes, a.Bytes, masked.Bytes)
	}
	for _, op := range []string{"paced:list", "paced:list-masked", "paced:get"} {
		for _, impl := range []string{ImplOurs, ImplBaselineA} {
			if r := res.row(op, impl, 5, 1); r == nil || r.Requests < 2 {
				t.Errorf("no paced measurement of %s %s: %+v", impl, op, r)
			}
		}
	}
	if r := res.row("paced:empty", ImplFloorRPC, 0, 1); r == nil || r.Requests < 2 {
		t.Errorf("no paced measurement of the empty RPC: %+v", r)
	}
	for _, op := range []string{"find:get", "find:container-id", "find:container-prefix", "find:ip", "find:cgroup", "find:pid", "find:caller"} {
		if r := res.row(op, ImplOurs, 20, 1); r == nil || r.Requests < 2 {
			t.Errorf("no FindPods measurement %s: %+v", op, r)
		}
	}
	if res.Find == nil || res.Find.Pods != 20 || len(res.Find.Costs) != 3 { // the heap of 20 pods is within the GC's noise
		t.Errorf("no index memory or /proc lookup costs: %+v", res.Find)
	}
	for _, op := range []string{"paced:empty", "paced:list", "paced:get"} {
		if r := res.row(op, ImplFloorConn, 5, 1); r == nil || r.Requests < 2 {
			t.Errorf("no paced measurement of %s on floor-conn: %+v", op, r)
		}
	}
	if a, fc := res.row("paced:list", ImplBaselineA, 5, 1), res.row("paced:list", ImplFloorConn, 5, 1); a != nil && fc != nil && (fc.Bytes < a.Bytes || fc.Bytes > a.Bytes+64) {
		t.Errorf("bytes per list: floor-conn %v, A %v", fc.Bytes, a.Bytes)
	}
	if len(res.Storms) != 2 || res.Storms[0].SyncP99Ms <= 0 {
		t.Errorf("sync storms: %+v, want one of ours and one of A", res.Storms)
	}
	if len(res.Watch) != 2 {
		t.Fatalf("%d watch results, want 2", len(res.Watch))
	}
	for _, w := range res.Watch {
		if w.Updates == 0 || w.Received != w.Expected || w.Lost != 0 {
			t.Errorf("watch %s: %d updates, %d of %d events", w.Impl, w.Updates, w.Received, w.Expected)
		}
	}
	if res.Idle == nil || res.Idle.RSSBytes == 0 {
		t.Errorf("no idle measurement")
	}
	// Idle wakeups: three states of ours and of the floor, each measured
	// (a window of 200 ms may hold no wakeup, so only the window is
	// checked), and the target evaluated.
	if len(res.Wakeups) != 6 {
		t.Errorf("%d wakeup measurements, want 6: %+v", len(res.Wakeups), res.Wakeups)
	}
	for _, w := range res.Wakeups {
		if w.Seconds < 0.2 || w.Threads == 0 || w.WakeupsPerSec < 0 || w.CPUUsPerSec < 0 {
			t.Errorf("wakeups %s %s: %+v", w.Impl, w.State, w)
		}
	}
	if tg := res.target("idle wakeups per second beyond keepalives"); tg == nil || tg.Status == "NOT MEASURED" {
		t.Errorf("idle wakeups target: %+v", tg)
	}
	if len(res.Targets) == 0 || len(res.Micro) == 0 {
		t.Errorf("no targets or micro-benchmarks")
	}
	if len(res.Selectors) != 9 || res.Selectors[0].Bytes <= res.Selectors[1].Bytes || res.Selectors[8].HeapBytes <= 0 {
		t.Errorf("selector measurements: %+v", res.Selectors)
	}
	for _, f := range []string{"p.svg", "b.md"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || len(b) < 500 {
			t.Errorf("%s: %d bytes, %v", f, len(b), err)
		}
	}
	if !strings.Contains(out.String(), "## Targets") {
		t.Errorf("no table printed:\n%s", out.String())
	}
}

// BenchmarkListPods measures ListPods of whole pods through a real server on
// a socket, in this process: ours against baseline A (Marshal per request).
func BenchmarkListPods(b *testing.B) {
	for _, impl := range []string{ImplOurs, ImplBaselineA} {
		b.Run(impl, func(b *testing.B) {
			for _, n := range []int{110, 1000} {
				b.Run(fmt.Sprint(n), func(b *testing.B) {
					dir, err := os.MkdirTemp("", "pb")
					if err != nil {
						b.Fatal(err)
					}
					defer os.RemoveAll(dir)
					c, err := startChild(context.Background(), childOptions{dir: dir, inProcess: true, watchQueue: 1000}, impl, n)
					if err != nil {
						b.Fatal(err)
					}
					defer c.stop()
					callers, closeFn, err := grpcUnary(c.socket, methodList, "", nil)(1)
					if err != nil {
						b.Fatal(err)
					}
					defer closeFn()
					ctx := context.Background()
					size, err := callers[0](ctx)
					if err != nil {
						b.Fatal(err)
					}
					b.SetBytes(int64(size))
					b.ReportAllocs()
					b.ResetTimer()
					for b.Loop() {
						if _, err := callers[0](ctx); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

func TestOnlyFlag(t *testing.T) {
	for _, tc := range []struct {
		name    string
		only    string
		runs    []string
		skips   []string
		wantErr string
	}{
		{name: "default runs all", only: "", runs: sections},
		{name: "two sections", only: "paced, storm", runs: []string{"paced", "storm"}, skips: []string{"closed", "watch", "idle", "wakeups", "micro", "floors", "selectors", "find", "footprint"}},
		{name: "unknown section", only: "paced,fast", wantErr: `unknown section "fast"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseFlags([]string{"--only", tc.only}, &bytes.Buffer{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.runs {
				if !o.runs(s) {
					t.Errorf("%s does not run", s)
				}
			}
			for _, s := range tc.skips {
				if o.runs(s) {
					t.Errorf("%s runs", s)
				}
			}
		})
	}
}

// target returns the target named name, or nil.
func (r *Results) target(name string) *Target {
	for i := range r.Targets {
		if r.Targets[i].Name == name {
			return &r.Targets[i]
		}
	}
	return nil
}

// TestFootprint builds podsapi-server and measures it as make bench does,
// so that the section cannot rot; its bound is go test's -timeout, since a
// cold build takes a minute or two.
func TestFootprint(t *testing.T) {
	f, err := runFootprint(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if f.BinaryBytes < 1<<20 || f.Packages < 100 || f.RSSBytes < 1<<20 || f.HWMBytes < f.RSSBytes || f.RSSFileBytes <= 0 || f.RSSFileBytes > f.RSSBytes {
		t.Errorf("footprint: %+v", f)
	}
	text := footprintText(&Results{Footprint: f})
	if !strings.Contains(text, fmtBytes(float64(f.RSSBytes))) {
		t.Errorf("the section does not show the RSS:\n%s", text)
	}
}
