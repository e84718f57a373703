// Package bench is the `make bench` harness: it runs our server and the
// baselines in child processes on UNIX sockets, drives them over the socket
// and reports every figure against the baselines and floors measured in the
// same run.
//
// The files follow that order: run.go holds the command and its flags,
// serve.go the server children and our server, baselines.go the baselines
// and floors, scenarios.go the sections of a run (client.go, watch.go,
// selectors.go, wakeups.go and micro.go the measurements they make), and
// report.go the results and their tables, targets and charts.
package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/test/childproc"
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
	// storm, idle, wakeups, micro, selectors, find, footprint); empty runs
	// them all.
	Only []string
	// OursEnv is added to the environment of our server's children (for
	// example GOGC=200), to measure the runtime's settings.
	OursEnv []string
	Command string
}

// Sections of the benchmark, for --only.
var sections = []string{"closed", "paced", "floors", "watch", "storm", "idle", "wakeups", "micro", "selectors", "find", "footprint"}

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
	if childproc.Role() != roleServer || len(os.Args) < 2 || os.Args[1] != "serve" {
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
	o.Command = "go run ./test/cmd/bench " + strings.Join(args, " ")
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
