// Package bench is the `make bench` harness: it runs our server and the
// baselines in child processes on UNIX sockets, drives them over the socket
// and reports every figure against the baselines and floors measured in the
// same run.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/podsapi/podsapi/internal/podstest"
	"github.com/podsapi/podsapi/server"
)

// Options are the flags of the benchmark.
type Options struct {
	Pods          []int
	Concurrency   []int
	Watchers      []int
	WatchImpls    []string
	Duration      time.Duration // per closed-loop measurement
	MinRequests   int
	WatchDuration time.Duration
	Churn         float64
	WatchPods     int
	IdlePods      int
	IdleWatchers  int
	DecodeTime    time.Duration
	// PacedRate is the call rate of the paced measurements (calls per
	// second, one client); 0 skips them.
	PacedRate float64
	// PacedDuration is the duration of each paced measurement.
	PacedDuration time.Duration
	// StormWatchers watchers start at once on StormPods pods in the sync
	// storm measurement; 0 skips it.
	StormWatchers int
	StormPods     int
	// SelectorPods are the pods of the selector and resume measurements;
	// 0 skips them.
	SelectorPods int
	// WakeupWindow is the window of each idle wakeup measurement; 0 skips
	// them.
	WakeupWindow time.Duration
	// WakeupSettle is how long each state is left alone before its
	// window.
	WakeupSettle  time.Duration
	Timeout       time.Duration
	JSON          string
	SVG           string
	MD            string
	CPUProfileDir string
	InProcess     bool
	Quick         bool
	// Only names the sections to run (closed, paced, floors, watch,
	// storm, idle, wakeups, micro, selectors, find); empty runs them all.
	Only []string
	// OursEnv is added to the environment of our server's children (for
	// example GOGC=200), to measure the runtime's settings.
	OursEnv []string
	Command string
}

// Sections of the benchmark, for --only.
var sections = []string{"closed", "paced", "floors", "watch", "storm", "idle", "wakeups", "micro", "selectors", "find"}

// runs reports whether section runs.
func (o Options) runs(section string) bool {
	return len(o.Only) == 0 || slices.Contains(o.Only, section)
}

// Run runs the benchmark command: `bench [flags]`, or the hidden
// `bench serve [flags]` that serves one implementation in a child process.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "serve" {
		return serveChild(ctx, args[1:], stdout, stderr)
	}
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	return runBench(ctx, o, stdout, stderr)
}

// ChildMain serves when the process is a re-executed server child, and
// reports whether it was one. Test binaries call it from TestMain.
func ChildMain() (bool, int) {
	if os.Getenv(childEnv) == "" || len(os.Args) < 2 || os.Args[1] != "serve" {
		return false, 0
	}
	if err := serveChild(context.Background(), os.Args[2:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return true, 1
	}
	return true, 0
}

func parseFlags(args []string, stderr io.Writer) (Options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o Options
	pods := fs.String("pods", "110,1000,5000", "pod counts of the ListPods/GetPod measurements")
	conc := fs.String("concurrency", "1,4", "closed-loop concurrent requests")
	watchers := fs.String("watchers", "1,100,1000", "watcher counts of the watch measurements")
	impls := fs.String("watch-impls", "ours,baselineA", "implementations of the watch measurements")
	fs.DurationVar(&o.Duration, "duration", 2*time.Second, "duration of each closed-loop measurement")
	fs.IntVar(&o.MinRequests, "min-requests", 5, "minimum requests of each measurement (bounded by 4x --duration)")
	fs.DurationVar(&o.WatchDuration, "watch-duration", 10*time.Second, "churn duration of each watch measurement")
	fs.Float64Var(&o.Churn, "churn", 1000, "status updates per second during watch measurements")
	fs.IntVar(&o.WatchPods, "watch-pods", 110, "pods of the watch measurements")
	fs.IntVar(&o.IdlePods, "idle-pods", 1000, "pods of the idle-watcher memory measurement")
	fs.IntVar(&o.IdleWatchers, "idle-watchers", 1000, "idle watchers of the memory measurement (0 skips it)")
	fs.DurationVar(&o.DecodeTime, "decode-time", time.Second, "duration of each in-process micro-benchmark")
	fs.Float64Var(&o.PacedRate, "paced-rate", 90, "calls per second of the paced measurements, as agents call (0 skips them)")
	fs.DurationVar(&o.PacedDuration, "paced-duration", 3*time.Second, "duration of each paced measurement")
	fs.IntVar(&o.StormWatchers, "storm-watchers", 100, "watchers starting at once in the sync storm measurement (0 skips it)")
	fs.IntVar(&o.StormPods, "storm-pods", 1000, "pods of the sync storm measurement")
	fs.IntVar(&o.SelectorPods, "selector-pods", 1000, "pods of the selector and resume measurements (0 skips them)")
	fs.DurationVar(&o.WakeupWindow, "wakeup-window", 10*time.Second, "window of each idle wakeup measurement (0 skips them)")
	fs.DurationVar(&o.WakeupSettle, "wakeup-settle", server.DefaultRequestReadTimeout+time.Second, "time each idle state is left alone before its window: longer than the request deadline the last calls armed")
	fs.DurationVar(&o.Timeout, "timeout", 15*time.Minute, "bound of the whole run")
	fs.StringVar(&o.JSON, "json", "", "write the results as JSON to this file")
	fs.StringVar(&o.SVG, "svg", "", "draw ListPods latency versus pod count to this SVG file")
	fs.StringVar(&o.MD, "md", "", "write the report (reproduction, machine, table, targets) to this Markdown file")
	fs.StringVar(&o.CPUProfileDir, "cpuprofile", "", "directory for CPU profiles of every server child")
	fs.BoolVar(&o.Quick, "quick", false, "small sizes and short durations (about a minute and a half)")
	oursEnv := fs.String("ours-env", "", "space-separated NAME=VALUE added to the environment of our server's children (for example GOGC=200)")
	only := fs.String("only", "", "comma-separated sections to run, of "+strings.Join(sections, ",")+" (default all)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.Quick {
		def := func(name string, apply func()) {
			if !set[name] {
				apply()
			}
		}
		def("pods", func() { *pods = "110,1000" })
		def("duration", func() { o.Duration = 300 * time.Millisecond })
		def("min-requests", func() { o.MinRequests = 3 })
		def("watchers", func() { *watchers = "1,100" })
		def("watch-duration", func() { o.WatchDuration = 2 * time.Second })
		def("idle-pods", func() { o.IdlePods = 110 })
		def("idle-watchers", func() { o.IdleWatchers = 200 })
		def("decode-time", func() { o.DecodeTime = 200 * time.Millisecond })
		def("paced-duration", func() { o.PacedDuration = time.Second })
		def("storm-pods", func() { o.StormPods = 110 })
		def("wakeup-window", func() { o.WakeupWindow = 3 * time.Second })
		def("wakeup-settle", func() { o.WakeupSettle = 2 * time.Second })
		def("timeout", func() { o.Timeout = 3 * time.Minute })
	}
	var err error
	if o.Pods, err = ints(*pods); err != nil {
		return o, err
	}
	if o.Concurrency, err = ints(*conc); err != nil {
		return o, err
	}
	if o.Watchers, err = ints(*watchers); err != nil {
		return o, err
	}
	o.OursEnv = strings.Fields(*oursEnv)
	for s := range strings.SplitSeq(*only, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !slices.Contains(sections, s) {
			return o, fmt.Errorf("--only: unknown section %q (sections: %s)", s, strings.Join(sections, ","))
		}
		o.Only = append(o.Only, s)
	}
	for s := range strings.SplitSeq(*impls, ",") {
		if s = strings.TrimSpace(s); s != "" {
			o.WatchImpls = append(o.WatchImpls, s)
		}
	}
	o.Command = "go run ./cmd/bench " + strings.Join(args, " ")
	return o, nil
}

func ints(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("bad number %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

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

func getRequest(pods int) []byte {
	i := pods / 2
	uid := podstest.UID(fmt.Sprintf("ns-%02d", i%10), fmt.Sprintf("pod-%05d-x7k2q", i))
	return protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), string(uid))
}

// lockedWriter serializes the writes of the harness and its children.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func runBench(ctx context.Context, o Options, stdout, stderr io.Writer) error {
	stderr = &lockedWriter{w: stderr}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "pb")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if o.CPUProfileDir != "" {
		if err := os.MkdirAll(o.CPUProfileDir, 0o755); err != nil {
			return err
		}
	}
	co := childOptions{dir: dir, inProcess: o.InProcess, cpuprofile: o.CPUProfileDir, stderr: stderr, watchQueue: 1000, oursEnv: o.OursEnv}
	res := &Results{Machine: machine(), Options: o, Started: time.Now()}
	logf := func(format string, a ...any) {
		fmt.Fprintf(stderr, "%s "+format+"\n", append([]any{time.Since(res.Started).Truncate(100 * time.Millisecond)}, a...)...)
	}
	fail := func(what string, err error) {
		logf("ERROR %s: %v", what, err)
		res.Errors = append(res.Errors, what+": "+err.Error())
	}
	measure := func(c *child, op string, pods int, f clientFactory) {
		for _, k := range o.Concurrency {
			if ctx.Err() != nil {
				return
			}
			r, err := load(ctx, c, f, k, o.Duration, o.MinRequests, 1_000_000, 0)
			if err != nil {
				fail(fmt.Sprintf("%s %s %d pods k=%d", c.impl, op, pods, k), err)
				continue
			}
			res.Rows = append(res.Rows, Row{Op: op, Impl: c.impl, Pods: pods, K: k, loadResult: r})
			logf("%-9s %-11s pods=%-5d k=%d  median %9.1fµs  p99 %9.1fµs  %9.0f B  cpu %8.1fµs/req  %7.0f allocs/req",
				c.impl, op, pods, k, r.MedianUs, r.P99Us, r.Bytes, r.CPUUs, r.Allocs)
		}
	}

	// ListPods and GetPod on every implementation and pod count.
	for _, n := range o.Pods {
		if !o.runs("closed") {
			break
		}
		for _, impl := range []string{ImplOurs, ImplBaselineA, ImplBaselineB} {
			if ctx.Err() != nil {
				break
			}
			c, err := startChild(ctx, co, impl, n)
			if err != nil {
				fail(fmt.Sprintf("start %s %d pods", impl, n), err)
				continue
			}
			if impl == ImplBaselineB {
				measure(c, "list", n, httpGet(c.socket, "http://localhost/pods"))
			} else {
				measure(c, "list", n, grpcUnary(c.socket, methodList, "", nil))
				measure(c, "list-masked", n, grpcUnary(c.socket, methodList, ListMask, nil))
				measure(c, "get", n, grpcUnary(c.socket, methodGet, "", getRequest(n)))
			}
			if impl == ImplOurs {
				// The same calls on the kubelet's wire, which must cost
				// no more than the typed one.
				measure(c, "kubelet:list", n, grpcUnary(c.socket, methodKubeletList, "", nil))
				measure(c, "kubelet:list-masked", n, grpcUnary(c.socket, methodKubeletList, ListMask, nil))
				measure(c, "kubelet:get", n, grpcUnary(c.socket, methodKubeletGet, "", getRequest(n)))
			}
			c.stop()
		}
	}
	// Paced: one client calling PacedRate times a second, as agents call,
	// which shows the per-call cost that back-to-back calls hide.
	if o.PacedRate > 0 && o.runs("paced") {
		pace := time.Duration(float64(time.Second) / o.PacedRate)
		minCount := max(o.MinRequests, int(o.PacedDuration.Seconds()*o.PacedRate/2))
		for _, n := range o.Pods {
			for _, impl := range []string{ImplOurs, ImplBaselineA} {
				if ctx.Err() != nil {
					break
				}
				c, err := startChild(ctx, co, impl, n)
				if err != nil {
					fail(fmt.Sprintf("start %s %d pods", impl, n), err)
					continue
				}
				for _, m := range []struct {
					op     string
					method string
					mask   string
					req    []byte
				}{
					{"paced:list", methodList, "", nil},
					{"paced:list-masked", methodList, ListMask, nil},
					{"paced:get", methodGet, "", getRequest(n)},
				} {
					r, err := load(ctx, c, grpcUnary(c.socket, m.method, m.mask, m.req), 1, o.PacedDuration, minCount, 1_000_000, pace)
					if err != nil {
						fail(fmt.Sprintf("%s %s %d pods", impl, m.op, n), err)
						continue
					}
					res.Rows = append(res.Rows, Row{Op: m.op, Impl: impl, Pods: n, K: 1, loadResult: r})
					logf("%-9s %-17s pods=%-5d %g/s  median %9.1fµs  p99 %9.1fµs  %9.0f B  cpu %8.1fµs/req (stat %8.1fµs/req)",
						impl, m.op, n, o.PacedRate, r.MedianUs, r.P99Us, r.Bytes, r.CPUUs, r.StatCPUUs)
				}
				c.stop()
			}
		}
		// The floor of a paced call on our transport: an empty connect RPC.
		if c, err := startChild(ctx, co, ImplFloorRPC, 0); err != nil {
			fail("start floor-rpc", err)
		} else {
			r, err := load(ctx, c, grpcUnary(c.socket, methodEmpty, "", nil), 1, o.PacedDuration, minCount, 1_000_000, pace)
			if err != nil {
				fail("floor-rpc paced:empty", err)
			} else {
				res.Rows = append(res.Rows, Row{Op: "paced:empty", Impl: ImplFloorRPC, K: 1, loadResult: r})
				logf("%-9s %-17s %g/s  median %9.1fµs  p99 %9.1fµs  cpu %8.1fµs/req (stat %8.1fµs/req)", ImplFloorRPC, "paced:empty", o.PacedRate, r.MedianUs, r.P99Us, r.CPUUs, r.StatCPUUs)
			}
			c.stop()
		}
		// The same unmasked calls on a transport with one goroutine per
		// connection that answers cached bytes inline: what our handlers
		// would cost on such a transport.
		for _, n := range o.Pods {
			if ctx.Err() != nil {
				break
			}
			c, err := startChild(ctx, co, ImplFloorConn, n)
			if err != nil {
				fail(fmt.Sprintf("start floor-conn %d pods", n), err)
				continue
			}
			for _, m := range []struct {
				op     string
				method string
				req    []byte
				pods   int
			}{
				{"paced:empty", methodEmpty, nil, n},
				{"paced:list", methodList, nil, n},
				{"paced:get", methodGet, getRequest(n), n},
			} {
				r, err := load(ctx, c, grpcUnary(c.socket, m.method, "", m.req), 1, o.PacedDuration, minCount, 1_000_000, pace)
				if err != nil {
					fail(fmt.Sprintf("floor-conn %s %d pods", m.op, n), err)
					continue
				}
				res.Rows = append(res.Rows, Row{Op: m.op, Impl: ImplFloorConn, Pods: m.pods, K: 1, loadResult: r})
				logf("%-9s %-17s pods=%-5d %g/s  median %9.1fµs  p99 %9.1fµs  %9.0f B  cpu %8.1fµs/req (stat %8.1fµs/req)",
					ImplFloorConn, m.op, n, o.PacedRate, r.MedianUs, r.P99Us, r.Bytes, r.CPUUs, r.StatCPUUs)
			}
			c.stop()
		}
	}

	// Floors: an empty RPC on our transport, and the same bytes as each of
	// our responses over a plain socket.
	if o.runs("floors") {
		runFloors(ctx, co, o, res, measure, fail)
	}

	// Watches.
	for _, w := range o.Watchers {
		if !o.runs("watch") {
			break
		}
		for _, impl := range o.WatchImpls {
			if ctx.Err() != nil {
				break
			}
			logf("watch %s: %d pods, %d watchers, %g updates/s for %v", impl, o.WatchPods, w, o.Churn, o.WatchDuration)
			r, err := runWatch(ctx, co, impl, o.WatchPods, w, o.Churn, o.WatchDuration)
			if err != nil {
				fail(fmt.Sprintf("watch %s %d watchers", impl, w), err)
				continue
			}
			res.Watch = append(res.Watch, r)
			logf("watch %s %d watchers: %d updates, %d/%d events, lost %d (%d by reading watchers, %d dropped), delay p50 %.0fµs p99 %.0fµs, cpu %.2f cores, %.1fµs/event, encodes/update %.2f, view computes/update %.2f",
				impl, w, r.Updates, r.Received, r.Expected, r.Lost, r.LostByReading, r.Dropped, r.DelayMedianUs, r.DelayP99Us, r.CPUCores, r.CPUUsPerEvent, r.EncodesPerUpd, r.ComputesPerUpd)
		}
	}

	// A sync storm: watchers starting at once on a large node, each timed to
	// its INITIAL_SYNC_COMPLETE.
	if o.StormWatchers > 0 && o.runs("storm") {
		for _, impl := range []string{ImplOurs, ImplBaselineA} {
			if ctx.Err() != nil {
				break
			}
			r, err := runStorm(ctx, co, impl, o.StormPods, o.StormWatchers)
			if err != nil {
				fail(fmt.Sprintf("storm %s", impl), err)
				continue
			}
			res.Storms = append(res.Storms, r)
			logf("storm %s: %d watchers on %d pods: sync p50 %.0fms p99 %.0fms, server CPU %.2fs", impl, r.Watchers, r.Pods, r.SyncP50Ms, r.SyncP99Ms, r.CPUSeconds)
		}
	}

	// Memory of idle watchers.
	if o.IdleWatchers > 0 && o.runs("idle") && ctx.Err() == nil {
		logf("idle: %d pods, %d watchers", o.IdlePods, o.IdleWatchers)
		r, err := runIdle(ctx, co, ImplOurs, o.IdlePods, o.IdleWatchers)
		if err != nil {
			fail("idle watchers", err)
		} else {
			res.Idle = &r
			logf("idle: RSS %d MiB with %d watchers, %d MiB without: %.1f KiB per watcher", r.RSSBytes>>20, r.Watchers, r.RSS0Bytes>>20, r.PerWatcherByte/1024)
		}
	}

	// Idle wakeups: ours against floor-rpc, the Go runtime's baseline.
	if o.WakeupWindow > 0 && o.runs("wakeups") {
		settle := o.WakeupSettle
		for _, impl := range []string{ImplFloorRPC, ImplOurs} {
			if ctx.Err() != nil {
				break
			}
			logf("wakeups %s: settle %v, window %v per state", impl, settle, o.WakeupWindow)
			ws, err := runWakeups(ctx, co, impl, o.WatchPods, settle, o.WakeupWindow)
			res.Wakeups = append(res.Wakeups, ws...)
			for _, w := range ws {
				logf("wakeups %-9s %-16s conns=%-3d watchers=%-3d threads=%-2d %7.2f wakeups/s %7.2f timeslices/s cpu %8.1fµs/s (schedstat %8.1fµs/s)",
					w.Impl, w.State, w.Connections, w.Watchers, w.Threads, w.WakeupsPerSec, w.TimeslicesPerSec, w.CPUUsPerSec, w.RunUsPerSec)
			}
			if err != nil {
				fail("wakeups "+impl, err)
			}
		}
	}

	// In-process micro-benchmarks: client decode, server response building.
	if o.runs("micro") && ctx.Err() == nil {
		res.Micro = runMicro(o.DecodeTime)
		for _, m := range res.Micro {
			logf("micro %-40s %10.1fµs/op %8.0f allocs/op %10.0f B/op", m.Name, m.NsPerOp/1e3, m.AllocsPerOp, m.BytesPerOp)
		}
	}
	// In-process selectors and resume (issue 16).
	if o.SelectorPods > 0 && o.runs("selectors") && ctx.Err() == nil {
		sel, err := runSelectors(ctx, co.dir, o.SelectorPods, o.Quick)
		if err != nil {
			fail("selectors", err)
		}
		res.Selectors = sel
		for _, s := range sel {
			logf("selectors %-60s %10.0f B %10.1fµs/op", s.Name, s.Bytes, s.NsPerOp/1e3)
		}
	}
	// FindPods by each key against GetPod, paced; the index's memory and
	// the cost of a /proc lookup (issue 22).
	if o.SelectorPods > 0 && o.PacedRate > 0 && o.runs("find") && ctx.Err() == nil {
		pace := time.Duration(float64(time.Second) / o.PacedRate)
		rows, fr, err := runFind(ctx, co, o.SelectorPods, pace, o.PacedDuration, max(o.MinRequests, int(o.PacedDuration.Seconds()*o.PacedRate/2)))
		if err != nil {
			fail("find", err)
		}
		res.Rows, res.Find = append(res.Rows, rows...), fr
		for _, x := range rows {
			logf("%-9s %-22s pods=%-5d %g/s  median %9.1fµs  p99 %9.1fµs  %9.0f B  cpu %8.1fµs/req", x.Impl, x.Op, x.Pods, o.PacedRate, x.MedianUs, x.P99Us, x.Bytes, x.CPUUs)
		}
		if fr != nil {
			logf("find index %.0f B/pod at %d pods", fr.IndexBytesPerPod, fr.Pods)
			for _, m := range fr.Costs {
				logf("find %-45s %8.1fµs/op %6.0f allocs/op", m.Name, m.NsPerOp/1e3, m.AllocsPerOp)
			}
		}
	}
	res.Seconds = time.Since(res.Started).Seconds()
	res.Targets = evaluate(res)
	for i := range res.Targets {
		if math.IsNaN(res.Targets[i].Value) {
			res.Targets[i].Value = 0 // JSON has no NaN; Status says NOT MEASURED
		}
	}
	if err := ctx.Err(); err != nil && !errors.Is(err, context.Canceled) {
		res.Errors = append(res.Errors, "run bounded by --timeout: "+err.Error())
	}

	writeTable(stdout, res)
	if o.JSON != "" {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.JSON, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if o.SVG != "" {
		if err := os.WriteFile(o.SVG, []byte(svgPlot(res)), 0o644); err != nil {
			return err
		}
	}
	if o.MD != "" {
		if err := os.WriteFile(o.MD, []byte(markdown(res)), 0o644); err != nil {
			return err
		}
	}
	if len(res.Errors) > 0 {
		return fmt.Errorf("%d measurements failed: %s", len(res.Errors), strings.Join(res.Errors, "; "))
	}
	return nil
}

// runFloors measures an empty RPC on our transport, and the same bytes as
// each of our closed-loop responses over a plain socket.
func runFloors(ctx context.Context, co childOptions, o Options, res *Results, measure func(*child, string, int, clientFactory), fail func(string, error)) {
	if c, err := startChild(ctx, co, ImplFloorRPC, 0); err != nil {
		fail("start floor-rpc", err)
	} else {
		measure(c, "empty", 0, grpcUnary(c.socket, methodEmpty, "", nil))
		c.stop()
	}
	if c, err := startChild(ctx, co, ImplFloorRaw, 0); err != nil {
		fail("start floor-raw", err)
	} else {
		for _, r := range slices.Clone(res.Rows) {
			if r.Impl != ImplOurs || r.K != o.Concurrency[0] || strings.HasPrefix(r.Op, "kubelet:") || strings.HasPrefix(r.Op, "paced:") || strings.HasPrefix(r.Op, "find:") {
				continue // the same bytes as the typed, closed-loop rows
			}
			size := int(r.Bytes)
			measure(c, "raw:"+r.Op, r.Pods, rawFloor(c.socket, size))
		}
		c.stop()
	}
}
