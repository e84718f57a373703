// Package conformance checks, over its socket alone, whether an
// implementation of the Kubelet Pods API behaves as the API promises, on
// either wire (Config.Wire): the typed kubelet.pods.v1alpha1.Pods, or the
// kubelet's own v1alpha1.Pods (pods as bytes), which a Kubernetes 1.37
// kubelet serves itself (features/kubelet-v1.37.yaml declares one).
//
// The suite is a catalogue of cases with stable hierarchical IDs such as
// "ListPods/FieldMask/InvalidPath", each checking one MUST statement of the
// API (see CASES.md). It talks to the implementation only through the UNIX
// socket (and, optionally, its Prometheus metrics endpoint), so it can judge
// any implementation: the reference podsapi-server, a kubelet, a virtual
// kubelet or an agent that embeds the API.
//
// Cases that need pods to appear, change and vanish use a driver: a static
// pod manifest directory (Config.ManifestDir) where the suite writes, edits
// and deletes Pod manifests, as with a kubelet's staticPodPath. Cases that
// need to start and stop the implementation use a Lifecycle. A case whose
// driver, lifecycle, metrics or declared feature is missing is SKIPPED with
// the reason, never passed.
//
// Every call and every expected event is bounded (Config.EventTimeout), and
// what an implementation was seen to lack (any answer, the sync marker,
// events on a synced stream) fails the later cases that need it at once,
// naming it: a run against a broken implementation ends in about one
// timeout, not one per case.
//
// RunCases runs the suite and returns a Report; Run does the same inside a
// Go test, one subtest per case. The podsapi-conformance command
// (cmd/podsapi-conformance) is the command-line runner.
package conformance

//go:generate go run ../cmd/podsapi-conformance --list --markdown --output CASES.md

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
)

// Version is the version of the conformance suite.
const Version = "0.1.0"

// APIVersion is the API the suite checks.
const APIVersion = "kubelet.pods.v1alpha1"

// Config says how to reach the implementation under test and what it
// declares.
type Config struct {
	// Endpoint is the UNIX socket of the implementation: a path or a
	// unix:// URL. Required.
	Endpoint string
	// Wire is the service the suite speaks and judges: WirePodsAPI (the
	// typed kubelet.pods.v1alpha1.Pods, the default when empty) or
	// WireKubelet (the kubelet's own v1alpha1.Pods). Cases that do not
	// apply to the wire are skipped.
	Wire Wire
	// ManifestDir is the static pod manifest directory the implementation
	// reads, used as the driver. Empty: cases that need the driver are
	// skipped.
	ManifestDir string
	// Lifecycle starts and stops the implementation. Nil: cases that need
	// to (re)start it are skipped. When set, the implementation must be
	// running when RunCases is called, and is running when it returns.
	Lifecycle Lifecycle
	// MetricsURL is the Prometheus metrics URL of the implementation, e.g.
	// http://127.0.0.1:10265/metrics. Empty: metrics cases are skipped.
	MetricsURL string
	// Features is what the implementation declares. Use DefaultFeatures()
	// as a start.
	Features Features
	// Run and Skip select cases by ID (regular expressions, unanchored);
	// nil selects all, and skips none.
	Run, Skip *regexp.Regexp
	// KnownFailing lists case IDs expected to fail: their failure does not
	// fail the run, but their success does, so that the list is kept up to
	// date.
	KnownFailing []string
	// KnownIntermittent lists cases known to fail in some runs only (a
	// race of the implementation's own), each with the failure it is known
	// for: that failure does not fail the run, and neither does their
	// success, but any other failure does. Prefer KnownFailing: a case
	// belongs here only with evidence that it does both.
	KnownIntermittent []Intermittent
	// CaseTimeout bounds each case; Features.CaseTimeout raises it.
	// Default 60s.
	CaseTimeout time.Duration
	// EventTimeout bounds each call of the suite (its answer, or the
	// response headers of a stream) and the wait for one expected watch
	// event. What an implementation failed to do within it (answer at all,
	// send INITIAL_SYNC_COMPLETE, send a change on a synced stream) fails
	// the case, and the later cases that need it fail at once instead of
	// waiting again. Features.EventTimeout raises it. Default 20s.
	EventTimeout time.Duration
	// StartTimeout bounds how long the implementation may take to answer
	// on its socket: beyond it, a harness error if nothing accepts
	// connections on the socket, and the defect "no answer" (every case
	// that calls it fails) if something does. Default 30s.
	StartTimeout time.Duration
	// RerunCommand is the command line printed, followed by --run, to tell
	// how to rerun a failed case alone. Default "podsapi-conformance ...".
	RerunCommand string
	// Log receives progress lines (one per case) when not nil; Verbose adds
	// the cases' own logs.
	Log     io.Writer
	Verbose bool
}

// Lifecycle starts and stops the implementation under test.
type Lifecycle interface {
	// Start starts the implementation and returns without waiting for its
	// socket: the suite watches the socket appear.
	Start(ctx context.Context) error
	// Stop stops it gracefully (SIGTERM for a process) and waits until it
	// has exited.
	Stop(ctx context.Context) error
}

// Status is the outcome of a case.
type Status string

// The outcomes of a case.
const (
	// Passed: the implementation did what the case checks.
	Passed Status = "PASSED"
	// Failed: it did not, or a case listed as known failing passed.
	Failed Status = "FAILED"
	// Skipped: the case could not run (no driver, lifecycle, metrics or
	// declared feature, or not selected); Message says why.
	Skipped Status = "SKIPPED"
	// KnownFailure: the case failed and is listed as known failing.
	KnownFailure Status = "KNOWN-FAILURE"
)

// Result is the outcome of one case.
type Result struct {
	// ID is the stable ID of the case, such as "GetPod/UnknownUID".
	ID string `json:"id"`
	// Statement is the MUST statement the case checks.
	Statement string `json:"statement"`
	Status    Status `json:"status"`
	// Message holds, for a failure, what was expected, what was seen and
	// how to rerun the case; for a skip, the reason.
	Message  string        `json:"message,omitempty"`
	Duration time.Duration `json:"durationNanos"`
	// Log holds what the case logged.
	Log []string `json:"log,omitempty"`
}

// Report is the outcome of a run.
type Report struct {
	SuiteVersion string `json:"suiteVersion"`
	// APIVersion is the service judged: the service of Wire.
	APIVersion string        `json:"apiVersion"`
	Wire       Wire          `json:"wire"`
	Endpoint   string        `json:"endpoint"`
	Started    time.Time     `json:"started"`
	Duration   time.Duration `json:"durationNanos"`
	Results    []Result      `json:"results"`
}

// Count returns how many results have status s.
func (r *Report) Count(s Status) int {
	n := 0
	for _, res := range r.Results {
		if res.Status == s {
			n++
		}
	}
	return n
}

// OK reports whether no case failed.
func (r *Report) OK() bool { return r.Count(Failed) == 0 }

// Result returns the result of the case id, if it ran or was skipped.
func (r *Report) Result(id string) (Result, bool) {
	for _, res := range r.Results {
		if res.ID == id {
			return res, true
		}
	}
	return Result{}, false
}

// HarnessError is an error of the harness or its configuration, not of the
// implementation: the suite could not judge it.
type HarnessError struct{ Err error }

func (e *HarnessError) Error() string { return "harness: " + e.Err.Error() }
func (e *HarnessError) Unwrap() error { return e.Err }

func harnessErr(format string, args ...any) error {
	return &HarnessError{fmt.Errorf(format, args...)}
}

// Banner is the line printed at the start of every run of the typed wire.
func Banner() string {
	return WirePodsAPI.banner()
}

func (w Wire) banner() string {
	return fmt.Sprintf("podsapi-conformance %s checking %s", Version, w.Service())
}

// RunCases runs the selected cases, one at a time, against the
// implementation of cfg and returns their results. The error is a
// *HarnessError when the suite could not run (bad configuration, the
// implementation never became reachable); the report then holds the
// results so far.
func RunCases(ctx context.Context, cfg Config) (*Report, error) {
	cfg = withDefaults(cfg)
	rep := &Report{SuiteVersion: Version, APIVersion: cfg.Wire.Service(), Wire: cfg.Wire, Endpoint: cfg.Endpoint, Started: time.Now()}
	defer func() { rep.Duration = time.Since(rep.Started) }()
	if cfg.Endpoint == "" {
		return rep, harnessErr("no endpoint: set the socket of the implementation")
	}
	if _, err := ParseWire(string(cfg.Wire)); err != nil {
		return rep, &HarnessError{err}
	}
	if err := cfg.Features.validate(); err != nil {
		return rep, &HarnessError{err}
	}
	if cfg.ManifestDir != "" && strings.Contains(cfg.Features.PodNameSuffix, "{nodeName}") {
		return rep, harnessErr("the features' podNameSuffix %q needs the node name: set it (podsapi-conformance --node-name)", cfg.Features.PodNameSuffix)
	}
	known := make(map[string]bool)
	for _, id := range cfg.KnownFailing {
		if caseByID(id) == nil {
			return rep, harnessErr("known-failing case %q does not exist (see --list)", id)
		}
		known[id] = true
	}
	intermittent := make(map[string]*regexp.Regexp)
	for _, k := range cfg.KnownIntermittent {
		if caseByID(k.ID) == nil {
			return rep, harnessErr("known-intermittent case %q does not exist (see --list)", k.ID)
		}
		if k.Failure == nil {
			return rep, harnessErr("known-intermittent case %q: no expression of its known failure", k.ID)
		}
		intermittent[k.ID] = k.Failure
	}
	if cfg.Log != nil {
		fmt.Fprintln(cfg.Log, cfg.Wire.banner())
	}
	env, err := newEnv(ctx, cfg)
	if err != nil {
		return rep, err
	}
	defer env.close()
	if err := env.waitReachable(ctx, cfg.StartTimeout); err != nil {
		return rep, err
	}
	for _, c := range Cases() {
		if ctx.Err() != nil {
			return rep, harnessErr("interrupted: %v", ctx.Err())
		}
		if (cfg.Run != nil && !cfg.Run.MatchString(c.ID)) || (cfg.Skip != nil && cfg.Skip.MatchString(c.ID)) {
			continue
		}
		res := env.runCase(ctx, c)
		if re := intermittent[c.ID]; re != nil && res.Status == Failed {
			if re.MatchString(res.Message) {
				res.Status = KnownFailure
				res.Message = "known to fail intermittently: " + res.Message
			} else {
				res.Message += fmt.Sprintf("\nthe case is listed as known to fail intermittently, but its failure does not match %q", re)
			}
		}
		if known[c.ID] {
			switch res.Status {
			case Failed:
				res.Status = KnownFailure
			case Passed:
				res.Status = Failed
				res.Message = "the case is listed as known failing but passed: remove it from the known-failing list"
			}
		}
		if res.Status == Failed && !strings.Contains(res.Message, "rerun:") {
			res.Message += fmt.Sprintf("\nrerun: %s --run '^%s$'", cfg.RerunCommand, regexp.QuoteMeta(c.ID))
		}
		rep.Results = append(rep.Results, res)
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "%-13s %s (%s)\n", res.Status, res.ID, res.Duration.Round(time.Millisecond))
			if res.Status != Passed && res.Message != "" {
				fmt.Fprintln(cfg.Log, indent(res.Message))
			}
			if cfg.Verbose {
				for _, l := range res.Log {
					fmt.Fprintln(cfg.Log, indent(l))
				}
			}
		}
		if env.harnessFailure != nil {
			return rep, env.harnessFailure
		}
	}
	if cfg.Log != nil {
		fmt.Fprintf(cfg.Log, "%d passed, %d failed, %d known failures, %d skipped in %s\n",
			rep.Count(Passed), rep.Count(Failed), rep.Count(KnownFailure), rep.Count(Skipped), time.Since(rep.Started).Round(time.Millisecond))
	}
	return rep, nil
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

func withDefaults(cfg Config) Config {
	if cfg.Wire == "" {
		cfg.Wire = WirePodsAPI
	}
	if cfg.CaseTimeout <= 0 {
		cfg.CaseTimeout = 60 * time.Second
	}
	if cfg.EventTimeout <= 0 {
		cfg.EventTimeout = 20 * time.Second
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	if cfg.RerunCommand == "" {
		cfg.RerunCommand = "podsapi-conformance ..."
	}
	if cfg.Features == (Features{}) {
		cfg.Features = DefaultFeatures()
	}
	if cfg.Features.WatchReports == "" {
		cfg.Features.WatchReports = WatchReportsAll
	}
	if d := cfg.Features.StartTimeout.Duration; d > cfg.StartTimeout {
		cfg.StartTimeout = d
	}
	if d := cfg.Features.CaseTimeout.Duration; d > cfg.CaseTimeout {
		cfg.CaseTimeout = d
	}
	if d := cfg.Features.EventTimeout.Duration; d > cfg.EventTimeout {
		cfg.EventTimeout = d
	}
	return cfg
}
