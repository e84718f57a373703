package bench

import (
	_ "embed"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Row is one closed-loop measurement.
type Row struct {
	Op   string `json:"op"` // list, list-masked, get, empty, raw
	Impl string `json:"impl"`
	Pods int    `json:"pods"`
	K    int    `json:"concurrency"`
	loadResult
}

// Results is everything one run measured.
type Results struct {
	Machine Machine       `json:"machine"`
	Options Options       `json:"options"`
	Started time.Time     `json:"started"`
	Seconds float64       `json:"seconds"`
	Rows    []Row         `json:"rows"`
	Watch   []watchResult `json:"watch"`
	Storms  []stormResult `json:"storms"`
	Idle    *idleResult   `json:"idle,omitempty"`
	// Wakeups are the idle wakeups of ours and floor-rpc (issue 15).
	Wakeups []wakeupState `json:"wakeups"`
	Micro   []microResult `json:"micro"`
	Targets []Target      `json:"targets"`
	Errors  []string      `json:"errors,omitempty"`

	// Selectors are the measurements of issue 16 (selectors and resume).
	Selectors []selectorResult `json:"selectors"`
	// Find are the measurements of issue 22 (FindPods) beside its rows.
	Find *findResults `json:"find,omitempty"`
	// Footprint is podsapi-server's own binary and idle memory.
	Footprint *footprintResult `json:"footprint,omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	CPU       string `json:"cpu"`
	NProc     int    `json:"nproc"`
	GoVersion string `json:"goVersion"`
	OS        string `json:"os"`
}

func machine() Machine {
	m := Machine{CPU: "unknown", NProc: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for l := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// Target is one goal of issue 4, checked against ratios of one run.
type Target struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Limit  float64 `json:"limit"`
	Cmp    string  `json:"cmp"` // "<=", "<", ">=", "=="
	Status string  `json:"status"`
	By     string  `json:"by"`
	Note   string  `json:"note,omitempty"`
}

func (r *Results) row(op, impl string, pods, k int) *Row {
	for i := range r.Rows {
		x := &r.Rows[i]
		if x.Op == op && x.Impl == impl && x.Pods == pods && x.K == k {
			return x
		}
	}
	return nil
}

// baselines returns the rows a row is compared with: A, B and the floor.
// A call on the kubelet's wire is compared with the same baselines as the
// typed call.
func (r *Results) baselines(x *Row) (a, b, floor *Row) {
	switch op := strings.TrimPrefix(x.Op, "kubelet:"); op {
	case "list", "list-masked":
		a = r.row(op, ImplBaselineA, x.Pods, x.K)
		b = r.row("list", ImplBaselineB, x.Pods, x.K)
		floor = r.row("raw:"+op, ImplFloorRaw, x.Pods, x.K)
	case "get":
		a = r.row("get", ImplBaselineA, x.Pods, x.K)
		floor = r.row("empty", ImplFloorRPC, 0, x.K)
	}
	return a, b, floor
}

func ratio(x float64, base *Row, f func(*Row) float64) string {
	if base == nil || f(base) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.3g", x/f(base))
}

func med(r *Row) float64 { return r.MedianUs }
func cpu(r *Row) float64 { return r.CPUUs }
func p99(r *Row) float64 { return r.P99Us }

func fmtUs(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2f s", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.2f ms", v/1e3)
	default:
		return fmt.Sprintf("%.0f µs", v)
	}
}

func fmtBytes(v float64) string {
	switch {
	case v >= 1<<20:
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case v >= 1<<10:
		return fmt.Sprintf("%.1f KiB", v/(1<<10))
	default:
		return fmt.Sprintf("%.0f B", v)
	}
}

// requestTable is the table of closed-loop measurements, our rows with
// ratios to A, B and the floor (ours / baseline: below 1 is better).
func requestTable(r *Results) string {
	var sb strings.Builder
	sb.WriteString("| op | pods | k | impl | median | p99 | bytes/resp | server CPU/req | allocs/req | RSS | median ×A | ×B | ×floor | p99 ×A | CPU ×A | ×B | ×floor | allocs ×A |\n")
	sb.WriteString("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	rows := slices.DeleteFunc(slices.Clone(r.Rows), func(x Row) bool { return strings.HasPrefix(x.Op, "paced:") || strings.HasPrefix(x.Op, "find:") })
	order := map[string]int{"list": 0, "kubelet:list": 1, "list-masked": 2, "kubelet:list-masked": 3, "get": 4, "kubelet:get": 5,
		"empty": 6, "raw:list": 7, "raw:list-masked": 8, "raw:get": 9}
	implOrder := map[string]int{ImplOurs: 0, ImplBaselineA: 1, ImplBaselineB: 2, ImplFloorRaw: 3, ImplFloorRPC: 4}
	slices.SortStableFunc(rows, func(a, b Row) int {
		if a.Op != b.Op {
			return order[a.Op] - order[b.Op]
		}
		if a.Pods != b.Pods {
			return a.Pods - b.Pods
		}
		if a.K != b.K {
			return a.K - b.K
		}
		return implOrder[a.Impl] - implOrder[b.Impl]
	})
	for i := range rows {
		x := &rows[i]
		a, b, f := r.baselines(x)
		rA, rB, rF, pA, cA, cB, cF, aA := "", "", "", "", "", "", "", ""
		if x.Impl == ImplOurs || (x.Impl == ImplBaselineA && x.Op != "get") {
			if x.Impl == ImplBaselineA {
				a = nil
			}
			rA, rB, rF = ratio(x.MedianUs, a, med), ratio(x.MedianUs, b, med), ratio(x.MedianUs, f, med)
			pA = ratio(x.P99Us, a, p99)
			cA, cB, cF = ratio(x.CPUUs, a, cpu), ratio(x.CPUUs, b, cpu), ratio(x.CPUUs, f, cpu)
			aA = ratio(x.Allocs, a, func(r *Row) float64 { return r.Allocs })
		}
		pods := fmt.Sprint(x.Pods)
		if x.Op == "empty" {
			pods = "–"
		}
		fmt.Fprintf(&sb, "| %s | %s | %d | %s | %s | %s | %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			x.Op, pods, x.K, x.Impl, fmtUs(x.MedianUs), fmtUs(x.P99Us), fmtBytes(x.Bytes), fmtUs(x.CPUUs), x.Allocs,
			fmtBytes(float64(x.RSSBytes)), rA, rB, rF, pA, cA, cB, cF, aA)
	}
	return sb.String()
}

// pacedTable shows the paced measurements: one client calling at a fixed
// rate, ours and floor-conn against baseline A.
func pacedTable(r *Results) string {
	var sb strings.Builder
	sb.WriteString("| op | pods | impl | median | p99 | bytes/resp | server CPU/req | allocs/req | median ×A | p99 ×A | CPU ×A | CPU ÷ empty RPC |\n")
	sb.WriteString("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	empty := r.row("paced:empty", ImplFloorRPC, 0, 1)
	for _, x := range r.Rows {
		if !strings.HasPrefix(x.Op, "paced:") {
			continue
		}
		rA, pA, cA, cF := "", "", "", ""
		if x.Impl == ImplOurs || x.Impl == ImplFloorConn {
			// floor-conn's empty call is compared with A's GetPod.
			op := x.Op
			if op == "paced:empty" {
				op = "paced:get"
			}
			a := r.row(op, ImplBaselineA, x.Pods, 1)
			rA, pA, cA = ratio(x.MedianUs, a, med), ratio(x.P99Us, a, p99), ratio(x.CPUUs, a, cpu)
			cF = ratio(x.CPUUs, empty, cpu)
		}
		pods := strconv.Itoa(x.Pods)
		if x.Impl == ImplFloorRPC {
			pods = "–"
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %s | %s | %.0f | %s | %s | %s | %s |\n",
			strings.TrimPrefix(x.Op, "paced:"), pods, x.Impl, fmtUs(x.MedianUs), fmtUs(x.P99Us), fmtBytes(x.Bytes), fmtUs(x.CPUUs), x.Allocs, rA, pA, cA, cF)
	}
	return sb.String()
}

// stormTable shows the sync storms.
func stormTable(r *Results) string {
	var sb strings.Builder
	sb.WriteString("| impl | pods | watchers | sync p50 | p99 | max | server CPU | p99 ×A |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	var a *stormResult
	for i := range r.Storms {
		if r.Storms[i].Impl == ImplBaselineA {
			a = &r.Storms[i]
		}
	}
	for _, x := range r.Storms {
		rA := ""
		if x.Impl == ImplOurs && a != nil && a.SyncP99Ms > 0 {
			rA = fmt.Sprintf("%.3g", x.SyncP99Ms/a.SyncP99Ms)
		}
		fmt.Fprintf(&sb, "| %s | %d | %d | %.0f ms | %.0f ms | %.0f ms | %.2f s | %s |\n", x.Impl, x.Pods, x.Watchers, x.SyncP50Ms, x.SyncP99Ms, x.SyncMaxMs, x.CPUSeconds, rA)
	}
	return sb.String()
}

func watchTable(r *Results) string {
	var sb strings.Builder
	sb.WriteString("| impl | pods | watchers | masks | updates | events received / expected | lost by reading watchers | dropped watchers | delay p50 | p99 | max | server CPU (cores) | CPU/event | allocs/event | RSS | pod encodes/update | view computes/update | p99 ×A | CPU ×A |\n")
	sb.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, w := range r.Watch {
		var a *watchResult
		for i := range r.Watch {
			if r.Watch[i].Impl == ImplBaselineA && r.Watch[i].Watchers == w.Watchers {
				a = &r.Watch[i]
			}
		}
		rp, rc := "", ""
		if w.Impl == ImplOurs && a != nil {
			rp = fmt.Sprintf("%.3g", w.DelayP99Us/a.DelayP99Us)
			rc = fmt.Sprintf("%.3g", w.CPUCores/a.CPUCores)
		}
		cnt := func(v float64) string {
			if v < 0 {
				return "n/a"
			}
			return fmt.Sprintf("%.2f", v)
		}
		computes := cnt(w.ComputesPerUpd)
		if len(w.ComputesByKind) > 0 {
			var parts []string
			for k, v := range w.ComputesByKind {
				parts = append(parts, fmt.Sprintf("%s %.2f", strings.Trim(k, "{}"), v))
			}
			slices.Sort(parts)
			computes += " (" + strings.Join(parts, ", ") + ")"
		}
		fmt.Fprintf(&sb, "| %s | %d | %d | %d | %d | %d / %d | %d | %d | %s | %s | %s | %.2f | %s | %.1f | %s | %s | %s | %s | %s |\n",
			w.Impl, w.Pods, w.Watchers, w.Masks, w.Updates, w.Received, w.Expected, w.LostByReading, w.Dropped,
			fmtUs(w.DelayMedianUs), fmtUs(w.DelayP99Us), fmtUs(w.DelayMaxUs), w.CPUCores, fmtUs(w.CPUUsPerEvent), w.AllocsPerEvent,
			fmtBytes(float64(w.RSSBytes)), cnt(w.EncodesPerUpd), computes, rp, rc)
	}
	return sb.String()
}

func microTable(r *Results) string {
	var sb strings.Builder
	sb.WriteString("| micro-benchmark (in process) | time/op | allocs/op | bytes/op |\n|---|---:|---:|---:|\n")
	for _, m := range r.Micro {
		fmt.Fprintf(&sb, "| %s | %s | %.0f | %s |\n", m.Name, fmtUs(m.NsPerOp/1e3), m.AllocsPerOp, fmtBytes(m.BytesPerOp))
	}
	return sb.String()
}

func idleText(r *Results) string {
	if r.Idle == nil {
		return "not measured\n"
	}
	i := r.Idle
	return fmt.Sprintf("| pods | idle watchers | RSS without watchers | RSS with watchers | marginal RSS per idle watcher | Go heap without / with | goroutines without / with |\n|---:|---:|---:|---:|---:|---:|---:|\n| %d | %d | %s | %s | %s | %s / %s | %d / %d |\n",
		i.Pods, i.Watchers, fmtBytes(float64(i.RSS0Bytes)), fmtBytes(float64(i.RSSBytes)), fmtBytes(i.PerWatcherByte),
		fmtBytes(float64(i.Heap0Bytes)), fmtBytes(float64(i.HeapBytes)), i.Goroutines0, i.Goroutines)
}

func targetTable(r *Results) string {
	var sb strings.Builder
	sb.WriteString("| target | measured | limit | status | by |\n|---|---:|---:|---|---|\n")
	for _, t := range r.Targets {
		v := "–"
		if t.Status != "NOT MEASURED" {
			v = fmt.Sprintf("%.3g", t.Value)
		}
		note := ""
		if t.Note != "" {
			note = " (" + t.Note + ")"
		}
		fmt.Fprintf(&sb, "| %s | %s | %s %.3g | **%s** | %s%s |\n", t.Name, v, t.Cmp, t.Limit, t.Status, t.By, note)
	}
	return sb.String()
}

// writeSummary ends the output of a run with what it met and where its
// report went, so that the last screen of make bench-quick says both.
func writeSummary(w io.Writer, r *Results, o Options) {
	count := map[string]int{}
	var missed []string
	for _, t := range r.Targets {
		count[t.Status]++
		if t.Status == "MISSED" {
			missed = append(missed, t.Name)
		}
	}
	fmt.Fprintf(w, "\nSummary: %d of %d targets met", count["MET"], len(r.Targets))
	if n := count["MISSED"]; n > 0 {
		fmt.Fprintf(w, ", %d missed", n)
	}
	if n := count["NOT MEASURED"]; n > 0 {
		fmt.Fprintf(w, ", %d not measured", n)
	}
	fmt.Fprintf(w, " (%.0f s", r.Seconds)
	if len(r.Errors) > 0 {
		fmt.Fprintf(w, ", %d measurements failed", len(r.Errors))
	}
	fmt.Fprintln(w, ").")
	if len(missed) > 0 {
		fmt.Fprintf(w, "Missed: %s.\n", strings.Join(missed, "; "))
		if o.Quick {
			fmt.Fprintln(w, "Quick runs use small sizes on a shared machine: a missed target is a hint, make bench measures it.")
		}
	}
	var files []string
	for _, f := range []struct{ what, path string }{{"report", o.MD}, {"results", o.JSON}, {"plot", o.SVG}} {
		if f.path != "" {
			files = append(files, f.what+" "+f.path)
		}
	}
	if len(files) > 0 {
		fmt.Fprintf(w, "Written: %s.\n", strings.Join(files, ", "))
	} else {
		fmt.Fprintln(w, "No report written (--md, --json, --svg).")
	}
}

// writeTable prints the results.
func writeTable(w io.Writer, r *Results) {
	fmt.Fprintf(w, "\n## ListPods / GetPod (closed loop; ×A, ×B, ×floor = ours ÷ baseline, below 1 is better)\n\n%s", requestTable(r))
	fmt.Fprintf(w, "\n## Paced (one client, %g calls/s)\n\n%s", r.Options.PacedRate, pacedTable(r))
	fmt.Fprintf(w, "\n## WatchPods\n\n%s", watchTable(r))
	fmt.Fprintf(w, "\n## Sync storm\n\n%s", stormTable(r))
	fmt.Fprintf(w, "\n## Idle watchers\n\n%s", idleText(r))
	fmt.Fprintf(w, "\n## Idle wakeups\n\n%s", wakeupsTable(r))
	fmt.Fprintf(w, "\n## podsapi-server at rest\n\n%s", footprintText(r))
	fmt.Fprintf(w, "\n## Micro-benchmarks\n\n%s", microTable(r))
	fmt.Fprintf(w, "\n## Selectors and resume\n\n%s", selectorsTable(r))
	fmt.Fprintf(w, "\n## FindPods\n\n%s", findTable(r))
	fmt.Fprintf(w, "\n## Targets\n\n%s", targetTable(r))
	if len(r.Errors) > 0 {
		fmt.Fprintf(w, "\nErrors:\n- %s\n", strings.Join(r.Errors, "\n- "))
	}
}

// evaluate checks the targets of issue 4 on ratios of this run (k = the
// first concurrency).
func evaluate(r *Results) []Target {
	k := 1
	if len(r.Options.Concurrency) > 0 {
		k = r.Options.Concurrency[0]
	}
	var ts []Target
	add := func(name string, v float64, cmp string, limit float64, note string) {
		t := Target{Name: name, Value: v, Limit: limit, Cmp: cmp, Note: note}
		switch {
		case math.IsNaN(v):
			t.Status, t.By = "NOT MEASURED", ""
		default:
			met := false
			switch cmp {
			case "<=":
				met = v <= limit
			case "<":
				met = v < limit
			case ">=":
				met = v >= limit
			case "==":
				met = v == limit
			}
			t.Status = map[bool]string{true: "MET", false: "MISSED"}[met]
			switch {
			case limit == 0:
				t.By = fmt.Sprintf("%g", v)
			case cmp == ">=":
				t.By = fmt.Sprintf("%.2gx the limit", v/limit)
			default:
				t.By = fmt.Sprintf("%.2gx the limit", v/limit)
			}
		}
		ts = append(ts, t)
	}
	val := func(x *Row, f func(*Row) float64) float64 {
		if x == nil {
			return math.NaN()
		}
		return f(x)
	}
	ours := r.row("list", ImplOurs, 110, k)
	a := r.row("list", ImplBaselineA, 110, k)
	b := r.row("list", ImplBaselineB, 110, k)
	fl := r.row("raw:list", ImplFloorRaw, 110, k)
	add("ListPods 110 full: median ÷ A", val(ours, med)/val(a, med), "<=", 0.2, "")
	add("ListPods 110 full: median ÷ B", val(ours, med)/val(b, med), "<=", 0.1, "")
	add("ListPods 110 full: median ÷ floor (same bytes, plain socket)", val(ours, med)/val(fl, med), "<=", 2, "")
	om := r.row("list-masked", ImplOurs, 110, k)
	add("ListPods 110 masked: full bytes ÷ masked bytes", val(ours, func(r *Row) float64 { return r.Bytes })/val(om, func(r *Row) float64 { return r.Bytes }), ">=", 30, "")
	add("ListPods 110 masked: median ÷ A full", val(om, med)/val(a, med), "<=", 0.05, "")
	g := r.row("get", ImplOurs, 110, k)
	e := r.row("empty", ImplFloorRPC, 0, k)
	add("GetPod: median ÷ empty RPC", val(g, med)/val(e, med), "<=", 1.5, "")
	kl := r.row("kubelet:list", ImplOurs, 110, k)
	add("ListPods 110 full, kubelet wire: median ÷ typed wire", val(kl, med)/val(ours, med), "<=", 1.1, "the same cached bytes; 10% for noise")
	add("ListPods 110 full, kubelet wire: server CPU ÷ typed wire", val(kl, cpu)/val(ours, cpu), "<=", 1.1, "")
	kg := r.row("kubelet:get", ImplOurs, 110, k)
	add("GetPod, kubelet wire: server CPU ÷ typed wire", val(kg, cpu)/val(g, cpu), "<=", 1.1, "a GetPod's median is too short to compare on a busy machine")

	// Issue 15: paced calls against baseline A, which stands in for the
	// upstream kubelet.
	// Each paced target says how much of our cost is our transport's
	// floor, an empty connect RPC paced alike: what no handler can save.
	empty := r.row("paced:empty", ImplFloorRPC, 0, 1)
	floor := func(x *Row, f func(*Row) float64, what string) string {
		if x == nil || empty == nil || f(empty) <= 0 {
			return ""
		}
		return fmt.Sprintf("ours is %.2fx the %s of an empty RPC on our transport", f(x)/f(empty), what)
	}
	// And what the same call measured on floor-conn, a transport with one
	// goroutine per connection that answers cached bytes inline.
	conn := func(op string, pods int, a *Row, f func(*Row) float64, note string) string {
		x := r.row(op, ImplFloorConn, pods, 1)
		if x == nil || a == nil || f(a) <= 0 {
			return note
		}
		if note != "" {
			note += "; "
		}
		return fmt.Sprintf("%sa one-goroutine transport measured %.2fx A", note, f(x)/f(a))
	}
	pl, pa := r.row("paced:list", ImplOurs, 110, 1), r.row("paced:list", ImplBaselineA, 110, 1)
	add("paced ListPods 110: median ÷ A", val(pl, med)/val(pa, med), "<=", 0.25, conn("paced:list", 110, pa, med, floor(pl, med, "median")))
	add("paced ListPods 110: server CPU ÷ A", val(pl, cpu)/val(pa, cpu), "<=", 0.2, conn("paced:list", 110, pa, cpu, floor(pl, cpu, "CPU")))
	pm := r.row("paced:list-masked", ImplOurs, 110, 1)
	add("paced masked ListPods 110: median ÷ A's full list", val(pm, med)/val(pa, med), "<=", 0.1, floor(pm, med, "median"))
	pg, pga := r.row("paced:get", ImplOurs, 110, 1), r.row("paced:get", ImplBaselineA, 110, 1)
	add("paced GetPod: median ÷ A", val(pg, med)/val(pga, med), "<=", 0.8, conn("paced:get", 110, pga, med, floor(pg, med, "median")))
	add("paced GetPod: server CPU ÷ A", val(pg, cpu)/val(pga, cpu), "<=", 0.8, conn("paced:get", 110, pga, cpu, floor(pg, cpu, "CPU")))
	pl1k, pa1k := r.row("paced:list", ImplOurs, 1000, 1), r.row("paced:list", ImplBaselineA, 1000, 1)
	add("paced ListPods 1000: median ÷ A", val(pl1k, med)/val(pa1k, med), "<=", 0.15, conn("paced:list", 1000, pa1k, med, floor(pl1k, med, "median")))
	stormOurs, stormA := math.NaN(), math.NaN()
	for _, x := range r.Storms {
		switch x.Impl {
		case ImplOurs:
			stormOurs = x.SyncP99Ms
		case ImplBaselineA:
			stormA = x.SyncP99Ms
		}
	}
	add(fmt.Sprintf("sync storm (%d watchers, %d pods): time to sync p99 ÷ A", r.Options.StormWatchers, r.Options.StormPods), stormOurs/stormA, "<=", 0.25, "")

	var w *watchResult
	for i := range r.Watch {
		if r.Watch[i].Impl == ImplOurs && (w == nil || r.Watch[i].Watchers > w.Watchers) {
			w = &r.Watch[i]
		}
	}
	if w == nil {
		w = &watchResult{EncodesPerUpd: math.NaN(), ComputesPerUpd: math.NaN(), DelayP99Us: math.NaN(), CPUCores: math.NaN(), LostByReading: -1}
	}
	wn := fmt.Sprintf("Watch %d watchers, %d masks, %g updates/s: ", w.Watchers, w.Masks, w.ChurnPerSec)
	nan := func(v float64) float64 {
		if v < 0 {
			return math.NaN()
		}
		return v
	}
	add(wn+"pod encodes per update", nan(w.EncodesPerUpd), "<=", 1, "podsapi_pod_encodes_total")
	maskComputes, frames := math.NaN(), math.NaN()
	if v, ok := w.ComputesByKind["{view=mask}"]; ok {
		maskComputes = v
	}
	if v, ok := w.ComputesByKind["{view=watch}"]; ok {
		frames = v
	}
	add(wn+"mask projections per update", maskComputes, "<=", float64(max(w.Masks, 1)),
		fmt.Sprintf("podsapi_view_computes_total{view=mask}; plus %.3g encoded watch events (a copy, view=watch) per update", frames))
	lost := float64(w.Lost)
	if w.LostByReading < 0 {
		lost = math.NaN()
	}
	add(wn+"events lost (every watcher reads continuously)", lost, "==", 0, fmt.Sprintf("%d of %d watchers dropped for falling behind", w.Dropped, w.Watchers))
	add(wn+"delivery delay p99 (µs)", w.DelayP99Us, "<", 10000, "")
	add(wn+"server CPU (cores)", w.CPUCores, "<", 1, "")
	if r.Idle != nil {
		add(fmt.Sprintf("Idle: marginal RSS of one idle watcher (KiB), %d pods", r.Idle.Pods), r.Idle.PerWatcherByte/1024, "<", 64,
			fmt.Sprintf("RSS %s with %d idle watchers", fmtBytes(float64(r.Idle.RSSBytes)), r.Idle.Watchers))
	} else {
		add("Idle: marginal RSS of one idle watcher (KiB)", math.NaN(), "<", 64, "")
	}
	if f := r.Footprint; f != nil {
		add("podsapi-server idle RSS, make run's settings (MiB)", float64(f.RSSBytes)/(1<<20), "<", footprintRSSLimit/(1<<20),
			fmt.Sprintf("VmHWM %s", fmtBytes(float64(f.HWMBytes))))
		add("podsapi-server binary (MiB)", float64(f.BinaryBytes)/(1<<20), "<", footprintBinaryLimit/(1<<20),
			fmt.Sprintf("%d packages linked", f.Packages))
	} else {
		add("podsapi-server idle RSS, make run's settings (MiB)", math.NaN(), "<", footprintRSSLimit/(1<<20), "")
		add("podsapi-server binary (MiB)", math.NaN(), "<", footprintBinaryLimit/(1<<20), "")
	}
	wv, wat := wakeupsBeyondKeepalives(r)
	add("idle wakeups per second beyond keepalives", wv, "<=", wakeupAllowance,
		"ours − floor-rpc − keepalives due in the window, worst state: "+wat)
	// Linearity: per-pod cost at the largest count over per-pod cost at 110.
	if len(r.Options.Pods) > 1 {
		big := slices.Max(r.Options.Pods)
		for _, f := range []struct {
			name string
			f    func(*Row) float64
		}{{"median", med}, {"server CPU", cpu}} {
			x, y := r.row("list", ImplOurs, 110, k), r.row("list", ImplOurs, big, k)
			v := (val(y, f.f) / float64(big)) / (val(x, f.f) / 110)
			add(fmt.Sprintf("Linear: ListPods full %s per pod at %d ÷ at 110", f.name, big), v, "<=", 1.5, "no cliff")
		}
	}
	return ts
}

// svgPlot draws the median ListPods latency (k = first concurrency) against
// the pod count, log-log, ours against the baselines and the floor.
func svgPlot(r *Results) string {
	k := 1
	if len(r.Options.Concurrency) > 0 {
		k = r.Options.Concurrency[0]
	}
	type series struct {
		label, op, impl, color, dash string
	}
	ss := []series{
		{"ours, full", "list", ImplOurs, "#1f77b4", ""},
		{"ours, masked", "list-masked", ImplOurs, "#1f77b4", "6,4"},
		{"baseline A (Marshal per request), full", "list", ImplBaselineA, "#d62728", ""},
		{"baseline A, masked", "list-masked", ImplBaselineA, "#d62728", "6,4"},
		{"baseline B (kubelet /pods JSON)", "list", ImplBaselineB, "#ff7f0e", ""},
		{"floor: same bytes as ours full, plain socket", "raw:list", ImplFloorRaw, "#7f7f7f", "2,3"},
	}
	const W, H, L, R, T, B = 760.0, 460.0, 70.0, 250.0, 40.0, 50.0
	var pods []int
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range r.Rows {
		if x.K == k && (x.Op == "list" || x.Op == "list-masked" || x.Op == "raw:list") {
			lo, hi = min(lo, x.MedianUs), max(hi, x.MedianUs)
			if !slices.Contains(pods, x.Pods) {
				pods = append(pods, x.Pods)
			}
		}
	}
	slices.Sort(pods)
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", W, H, W, H)
	fmt.Fprintf(&sb, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&sb, `<text x="%.0f" y="22" font-size="14" font-weight="bold">ListPods median latency vs pod count (k=%d, log-log)</text>`+"\n", L, k)
	if len(pods) == 0 || math.IsInf(lo, 0) {
		sb.WriteString(`<text x="70" y="100">no data</text></svg>` + "\n")
		return sb.String()
	}
	ylo, yhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if yhi == ylo {
		yhi++
	}
	xlo, xhi := math.Log10(float64(pods[0])), math.Log10(float64(pods[len(pods)-1]))
	if xhi == xlo {
		xlo, xhi = xlo-0.5, xhi+0.5
	}
	px := func(n int) float64 { return L + (math.Log10(float64(n))-xlo)/(xhi-xlo)*(W-L-R) }
	py := func(us float64) float64 { return H - B - (math.Log10(us)-ylo)/(yhi-ylo)*(H-T-B) }
	// Axes and grid.
	fmt.Fprintf(&sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", L, H-B, W-R, H-B)
	fmt.Fprintf(&sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", L, T, L, H-B)
	for e := ylo; e <= yhi; e++ {
		y := py(math.Pow(10, e))
		fmt.Fprintf(&sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", L, y, W-R, y)
		fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", L-6, y+4, fmtUs(math.Pow(10, e)))
	}
	for _, n := range pods {
		x := px(n)
		fmt.Fprintf(&sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x, T, x, H-B)
		fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", x, H-B+18, n)
	}
	fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" text-anchor="middle">pods</text>`+"\n", (L+W-R)/2, H-12)
	fmt.Fprintf(&sb, `<text x="16" y="%.1f" text-anchor="middle" transform="rotate(-90 16 %.1f)">median latency</text>`+"\n", (T+H-B)/2, (T+H-B)/2)
	for i, s := range ss {
		var pts []string
		for _, n := range pods {
			if x := r.row(s.op, s.impl, n, k); x != nil {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(n), py(x.MedianUs)))
			}
		}
		if len(pts) == 0 {
			continue
		}
		dash := ""
		if s.dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, s.dash)
		}
		fmt.Fprintf(&sb, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", s.color, dash, strings.Join(pts, " "))
		for _, p := range pts {
			xy := strings.Split(p, ",")
			fmt.Fprintf(&sb, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", xy[0], xy[1], s.color)
		}
		ly := T + 10 + float64(i)*20
		fmt.Fprintf(&sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", W-R+10, ly, W-R+34, ly, s.color, dash)
		fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" font-size="10">%s</text>`+"\n", W-R+38, ly+4, s.label)
	}
	sb.WriteString("</svg>\n")
	return sb.String()
}

// markdown is docs/benchmarks.md.
func markdown(r *Results) string {
	var sb strings.Builder
	o := r.Options
	fmt.Fprintf(&sb, `# Benchmarks

Generated by `+"`%s`"+` on %s (%.0f s). Every ratio compares figures measured
in the same run on the same pods; the machine is shared, so absolute numbers
are noisy and only the ratios are meant to be compared across runs.

## How to reproduce

`+"```sh"+`
make bench         # go run ./test/cmd/bench --json bench-results.json --svg docs/bench-list-latency.svg --md docs/benchmarks.md
make bench-quick   # the same with --quick (about a minute and a half; smaller sizes, shorter measurements)
go test -run '^$' -bench ListPods -benchmem ./test/bench/   # in-process ours vs baseline A on a real socket
`+"```"+`

Profiles of every server child: add `+"`--cpuprofile DIR`"+`, then `+"`go tool pprof DIR/ours-110-1.pprof`"+`.

## Machine

- CPU: %s
- nproc: %d
- %s, %s

## What is measured

- **ours**: the real server (`+"`server.New`"+` on `+"`store.New()`"+`, rate limit off) in a child process.
- **baselineA**: a grpc-go server over the same kind of socket that keeps `+"`k8s.io/api`"+` pods and calls `+"`pod.Marshal()`"+`
  (then the field mask projection, when there is a mask) for every pod of every request and every watch event; the
  bytes on the wire are the same as ours.
- **baselineB**: the kubelet's `+"`/pods`"+`: a `+"`v1.PodList`"+` copied from the pods and encoded with the legacy JSON codec
  (`+"`k8s.io/apimachinery`"+` serializer, scheme with corev1) per request, HTTP/1.1 on a UNIX socket.
- **floor-raw**: the same number of response bytes as our response, over a plain UNIX socket with a 4-byte
  length prefix (row op `+"`raw:<op>`"+`).
- **floor-rpc**: an empty unary connect RPC, h2c on a socket with our http.Server settings (row op `+"`empty`"+`).
- **floor-conn** (paced rows only): a transport with one goroutine per connection that answers cached bytes
  inline (x/net/http2's Framer, h2c, each response written with one flush; the empty RPC and unmasked
  ListPods/GetPod with the bytes our service builds): what our handlers would cost on such a transport; a
  measurement, not a server. Its ×A compares with A's same call; for its empty call, with A's GetPod.

Each server runs in its own process (`+"`bench serve --impl ...`"+`); server CPU is utime+stime from
`+"`/proc/PID/stat`"+` over the measurement divided by requests (or events) (paced calls, too few for its 10 ms
ticks: the run time of the child's threads, `+"`/proc/PID/task/*/schedstat`"+` in ns), RSS is `+"`VmRSS`"+`, allocations come
from `+"`runtime/metrics`"+` of the child (`+"`/gc/heap/allocs:objects`"+`). The client is grpc-go with a codec that
keeps the raw bytes (nothing is decoded), closed loop with k concurrent requests on one connection, for
%v per measurement (at least %d requests). Client decode cost is in the micro-benchmarks. Pods are
`+"`podstest.Pod`"+` (about 5 KB of protobuf each).

Watches: %d pods, one connection per watcher, the 10 masks of `+"`bench.WatchMasks`"+` in turn; every
mask includes `+"`metadata.resourceVersion`"+`, where the server's churn writes the time of each update
(Unix ns), so every update reaches every watcher and its delivery delay is measured with the host clock
(receive time minus update time; client and server share the 2 cores, so the delay includes client
scheduling). Churn is %g status updates/s for %v; CPU is over the churn window; events are counted
after a drain of up to 10 s.

![ListPods latency](bench-list-latency.svg)

## Results

### ListPods / GetPod

×A, ×B, ×floor are ours ÷ baseline (below 1 is better). ×B compares with B's full JSON list.
The floor of a list is floor-raw with the same bytes; the floor of GetPod is the empty RPC.

%s
### Paced calls (issue 15)

One client calls at %g calls/s, as agents call (sporadically, not back to back), for %v per measurement:
this shows the per-call cost of waking the server that closed-loop calls hide. Where that cost goes is in
[profile.md](profile.md).

%s
### WatchPods

%s
### Sync storm

%d watchers start at once, one connection each, on %d pods without churn; each is timed from the start to its
INITIAL_SYNC_COMPLETE.

%s
### Idle watchers

%s
### Idle wakeups (issue 15)

%s
### podsapi-server at rest

The command itself, as a DaemonSet pays it on every node: `+"`CGO_ENABLED=0 go build -trimpath ./cmd/podsapi-server`"+` (the image's build, symbols kept), the packages it links,
and its memory with make run's settings (the example manifests, no Kubernetes API, no NRI) once it reports SERVING
and has been left alone for %v, from `+"`/proc/PID/status`"+`; medians of %d starts. The sections above measure the
server package in the harness's children, which link neither its sources nor its Kubernetes API.

%s
### Micro-benchmarks (client decode and response building, in process)

%s
## Targets (issues 4, 11 and 15)

%s`, r.Options.Command, r.Started.Format("2006-01-02 15:04 MST"), r.Seconds,
		r.Machine.CPU, r.Machine.NProc, r.Machine.GoVersion, r.Machine.OS,
		o.Duration, o.MinRequests, o.WatchPods, o.Churn, o.WatchDuration,
		requestTable(r), o.PacedRate, o.PacedDuration, pacedTable(r), watchTable(r), o.StormWatchers, o.StormPods, stormTable(r),
		idleText(r), wakeupsText(r), footprintIdle, footprintStarts, footprintText(r), microTable(r), targetTable(r))
	fmt.Fprintf(&sb, "\n## Selectors and resume (issue 16)\n\n"+
		"In process, against the real server on a UNIX socket: lists of every pod, of 10%% of them (by namespace,\n"+
		"by label and field selectors) and of none, each after a change of one pod (so the response is assembled\n"+
		"again); a watch resumed (`resume_from`) after a client was away 1 or 10 s while 100 pods/s changed, against\n"+
		"a full resync, timed to INITIAL_SYNC_COMPLETE; the heap held by a full history of the default size. Times\n"+
		"include the connect-go client decoding typed pods. See [benchmarks-selectors.md](benchmarks-selectors.md).\n\n%s",
		selectorsTable(r))
	fmt.Fprintf(&sb, "\n## FindPods (issue 22)\n\n"+
		"FindPods by each key against GetPod of the same pod, on one server child of %d pods, one client paced at %g calls/s\n"+
		"for %s each; the server's --host-proc is a fake tree whose process %d and the harness itself run in the pod's app\n"+
		"container. Then, in process, the heap of the index per pod and the cost of a /proc lookup.\n\n%s",
		o.SelectorPods, o.PacedRate, o.PacedDuration, findPID, findTable(r))
	fmt.Fprintf(&sb, "\n%s", workloads)
	fmt.Fprintf(&sb, "\n%s", controlPlane)
	fmt.Fprintf(&sb, "\n%s", nodeView)
	fmt.Fprintf(&sb, "\n%s", changes)
	fmt.Fprintf(&sb, "\n%s", kubeletSideBySide)
	fmt.Fprintf(&sb, "\n%s", runtimeEvents)
	fmt.Fprintf(&sb, "\n%s", runtimeWindow)
	fmt.Fprintf(&sb, "\n%s", findWait)
	fmt.Fprintf(&sb, "\n%s", revisions)
	fmt.Fprintf(&sb, "\n%s", doorSoak)
	if len(r.Errors) > 0 {
		fmt.Fprintf(&sb, "\nErrors:\n\n- %s\n", strings.Join(r.Errors, "\n- "))
	}
	return sb.String()
}

// changes is the record of what was changed for the targets, and what each
// change measured: written by hand, since a change is measured against the
// code before it, which a single run cannot.
//
//go:embed changes.md
var changes string

// controlPlane is the measurement of the API server's load with agents
// direct or through podsapi (issue 21): written by `make bench-apiserver`
// (TestAPIServerLoad), which needs a real kube-apiserver, so that `make
// bench` keeps it without running it.
//
//go:embed apiserver.md
var controlPlane string

// nodeView is the measurement of the agents that describe a node's pods,
// directly and through the door's full and node views (issue 46), written
// by `make bench-nodeview` (TestNodeView), which needs a real
// kube-apiserver and minutes of both cores: make bench copies the last one.
//
//go:embed nodeview.md
var nodeView string

// kubeletSideBySide is the comparison with a real kubelet, written by make
// bench-kubelet (test/realkubelet TestSideBySide): make bench cannot
// run a kubelet, so it copies the last measurement.
//
//go:embed kubelet.md
var kubeletSideBySide string

// runtimeEvents is the measurement of FindPods after the container
// runtime's NRI events (issue 34), by the benchmark of package nri.
//
//go:embed nri.md
var runtimeEvents string

// runtimeWindow is the window NRI closes, measured side by side on a real
// node with and without NRI through both pod sources, written by make
// bench-nri (test/e2enode TestNRIWindow): make bench cannot run a
// node, so it copies the last measurement.
//
//go:embed nri-window.md
var runtimeWindow string

// findWait is FindPods that waits against agents that poll (issue 42),
// written by make bench-findwait (TestFindWaitAgainstPolling), which takes
// a minute of waiting: make bench copies the last measurement.
//
//go:embed findwait.md
var findWait string

// revisions is a measurement of one revision against another, interleaved,
// by make bench-ab (test/cmd/benchab), which needs two builds: make
// bench copies the last one written by hand from its output.
//
//go:embed ab.md
var revisions string

// workloads is what the resolution of workloads asks of a real API server
// for a node of 110 pods over a simulated hour, against k8sattributes'
// ReplicaSet informer, written by hand from workload's TestRequestsAPIServer,
// which needs a real kube-apiserver: make bench copies the last one.
//
//go:embed workloads.md
var workloads string

// doorSoak is the front door's watches under churn, written by hand from
// make soak-door (kubeapi/door TestDoorAPIServerSoak), which needs a real
// kube-apiserver: make bench copies the last one.
//
//go:embed door-soak.md
var doorSoak string
