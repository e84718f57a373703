package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/time/rate"

	"github.com/podsapi/podsapi/internal/h2c"
)

// maxMessageBytes is the receive limit of the suite's clients.
const maxMessageBytes = 256 << 20

// env is the state shared by the cases of a run.
type env struct {
	cfg     Config
	socket  string
	runID   string
	http    *http.Client
	client  podsClient
	pacer   *rate.Limiter
	driver  *manifestDriver
	mu      sync.Mutex
	clients []*http.Client

	// cases counts the cases run, for the driver's case tags.
	cases int

	harnessFailure error
	// defects are what the implementation was seen to lack, by defect,
	// so that the cases that depend on it fail at once, naming it, instead
	// of each waiting for it in vain.
	defects map[defect]string
}

// defect is a failure of the implementation that the cases after the one
// that saw it do not wait for again.
type defect string

const (
	// noAnswer: the implementation accepts connections but answered no
	// call within its deadline.
	noAnswer defect = "no answer"
	// noSyncMarker: a WatchPods stream did not send
	// EVENT_TYPE_INITIAL_SYNC_COMPLETE within EventTimeout.
	noSyncMarker defect = "no sync marker"
	// stalledWatch: a synced WatchPods stream sent nothing within
	// EventTimeout while the driver changed a pod.
	stalledWatch defect = "stalled watch"
)

// seen records d, described by msg, unless already recorded.
func (e *env) seen(d defect, msg string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.defects[d]; !ok {
		e.defects[d] = msg
	}
}

// defect returns the description of d if it was seen.
func (e *env) defect(d defect) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	msg, ok := e.defects[d]
	return msg, ok
}

func newEnv(_ context.Context, cfg Config) (*env, error) {
	e := &env{cfg: cfg, socket: h2c.SocketPath(cfg.Endpoint), defects: map[defect]string{}}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, &HarnessError{err}
	}
	e.runID = hex.EncodeToString(b[:])
	e.http = e.newHTTPClient(nil)
	e.client = e.newClient(e.http)
	if q := cfg.Features.RateLimit.QPS; q > 0 {
		// Stay below the declared rate, so that the suite's own calls are
		// not refused.
		e.pacer = rate.NewLimiter(rate.Limit(q*0.8), 1)
	}
	if cfg.ManifestDir != "" {
		st, err := os.Stat(cfg.ManifestDir)
		if err != nil || !st.IsDir() {
			return nil, harnessErr("manifest directory %q: not a directory: %v", cfg.ManifestDir, err)
		}
		e.driver = &manifestDriver{dir: cfg.ManifestDir, runID: e.runID, suffix: cfg.Features.PodNameSuffix,
			statusOnly: cfg.Features.WatchReports == WatchReportsStatus}
	}
	return e, nil
}

// newHTTPClient returns an h2c client of the socket, with HTTP/2 settings
// if given, closed at the end of the run.
func (e *env) newHTTPClient(h2 *http.HTTP2Config) *http.Client {
	hc := h2c.NewClient(e.socket)
	if h2 != nil {
		hc.Transport.(*http.Transport).HTTP2 = h2
	}
	e.mu.Lock()
	e.clients = append(e.clients, hc)
	e.mu.Unlock()
	return hc
}

// newClient returns a client of the wire under test over hc.
func (e *env) newClient(hc *http.Client) podsClient { return newPodsClient(e.cfg.Wire, hc) }

func (e *env) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.clients {
		c.CloseIdleConnections()
	}
}

// waitReachable waits until the implementation answers ListPods on its
// socket with anything but FAILED_PRECONDITION (still initialising) or
// RESOURCE_EXHAUSTED (whichever it checks first). An implementation that accepts connections but
// answers no call within timeout is reachable but broken: the wait
// returns, and the calls of the cases fail at once, naming the defect. One
// that does not accept connections is a harness error.
func (e *env) waitReachable(ctx context.Context, timeout time.Duration) error {
	if _, ok := e.defect(noAnswer); ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	accepted := false
	for {
		if !accepted {
			var d net.Dialer
			if conn, err := d.DialContext(ctx, "unix", e.socket); err == nil {
				accepted = true
				conn.Close()
			}
		}
		if e.pacer != nil {
			_ = e.pacer.Wait(ctx) // on error ctx is done: the select below tells
		}
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := e.client.list(cctx, nil)
		ccancel()
		if answered(err) && codeOf(err) != connect.CodeFailedPrecondition && codeOf(err) != connect.CodeResourceExhausted {
			return nil
		}
		last = err
		var exited <-chan struct{}
		if x, ok := e.cfg.Lifecycle.(interface{ Exited() <-chan struct{} }); ok {
			exited = x.Exited()
		}
		select {
		case <-exited:
			return harnessErr("the implementation exited before it answered on %s", e.socket)
		case <-ctx.Done():
			if answered(last) {
				return harnessErr("the implementation did not finish initialising within %s: %v", timeout, last)
			}
			if accepted && ctx.Err() == context.DeadlineExceeded {
				e.seen(noAnswer, fmt.Sprintf("the implementation accepts connections on %s but answered no ListPods within %s: %v", e.socket, timeout, last))
				return nil
			}
			return harnessErr("the implementation did not become reachable on %s within %s: %v", e.socket, timeout, last)
		case <-tick.C:
		}
	}
}

// answered reports whether err (of a call) is an answer of the
// implementation rather than a failure to reach it.
func answered(err error) bool {
	if err == nil {
		return true
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return false
	}
	switch ce.Code() {
	case connect.CodeUnavailable, connect.CodeCanceled, connect.CodeDeadlineExceeded, connect.CodeUnknown:
		return false
	}
	return true
}

// failure ends a case as failed.
type failure struct{ msg string }

// C is the state of one running case.
type C struct {
	ctx      context.Context
	env      *env
	id       string
	mu       sync.Mutex
	log      []string
	status   Status
	msg      string
	cleanups []func()
	created  map[string]bool
}

// Logf records a line in the case's log.
func (c *C) Logf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, fmt.Sprintf(format, args...))
}

// Fatalf ends the case as failed.
func (c *C) Fatalf(format string, args ...any) {
	c.mu.Lock()
	c.status = Failed
	c.msg = fmt.Sprintf(format, args...)
	c.mu.Unlock()
	runtime.Goexit()
}

// Failf ends the case as failed, saying what was sent, expected and seen.
func (c *C) Failf(request, expected, seen string) {
	c.Fatalf("request:  %s\nexpected: %s\nseen:     %s", request, expected, seen)
}

// Skipf ends the case as skipped.
func (c *C) Skipf(format string, args ...any) {
	c.mu.Lock()
	c.status = Skipped
	c.msg = fmt.Sprintf(format, args...)
	c.mu.Unlock()
	runtime.Goexit()
}

// Cleanup registers f to run at the end of the case, last first.
func (c *C) Cleanup(f func()) { c.cleanups = append(c.cleanups, f) }

// runCase runs one case in its own goroutine, bounded by CaseTimeout.
func (e *env) runCase(ctx context.Context, tc *Case) (res Result) {
	res = Result{ID: tc.ID, Statement: tc.Statement}
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()
	if reason := e.missing(tc); reason != "" {
		res.Status, res.Message = Skipped, reason
		return res
	}
	timeout := e.cfg.CaseTimeout
	if slices.Contains(tc.Needs, NeedLifecycle) {
		// A lifecycle case waits for a start on top of its own work.
		timeout += e.cfg.StartTimeout
	}
	e.cases++
	if e.driver != nil {
		// Cases run one at a time: the tag is the running case's.
		e.driver.tag = fmt.Sprintf("c%02d", e.cases)
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := &C{ctx: cctx, env: e, id: tc.ID, status: Passed}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			for i := len(c.cleanups) - 1; i >= 0; i-- {
				c.cleanups[i]()
			}
		}()
		defer func() {
			if r := recover(); r != nil {
				c.mu.Lock()
				c.status, c.msg = Failed, fmt.Sprintf("panic: %v", r)
				c.mu.Unlock()
			}
		}()
		tc.run(c)
	}()
	select {
	case <-done:
	case <-time.After(timeout + e.cfg.StartTimeout + 60*time.Second):
		e.harnessFailure = harnessErr("case %s did not stop within %s of its timeout", tc.ID, e.cfg.StartTimeout+60*time.Second)
		c.mu.Lock()
		c.status, c.msg = Failed, "the case did not end: "+e.harnessFailure.Error()
		c.mu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	res.Status, res.Message, res.Log = c.status, c.msg, append([]string(nil), c.log...)
	if res.Status == Failed {
		if hint := e.timeoutHint(deadlineReached(cctx, res.Message), timeout, slices.Contains(tc.Needs, NeedLifecycle)); hint != "" {
			res.Message += hint
		} else {
			res.Message += e.eventTimeoutHint(res.Message)
		}
	}
	return res
}

// missing returns why tc cannot run, or "".
func (e *env) missing(tc *Case) string {
	if !tc.AppliesTo(e.cfg.Wire) {
		return fmt.Sprintf("does not apply to the %s wire", e.cfg.Wire)
	}
	for _, n := range tc.Needs {
		switch n {
		case NeedDriver:
			if e.driver == nil {
				return "needs the manifest directory driver: run with --manifest-dir (or --server-cmd)"
			}
		case NeedLifecycle:
			if e.cfg.Lifecycle == nil {
				return "needs to start and stop the implementation: run with --server-cmd"
			}
		case NeedMetrics:
			if e.cfg.MetricsURL == "" {
				return "needs the metrics endpoint: run with --metrics-url (or {metrics} in --server-cmd)"
			}
		case NeedEventTypes:
			if !e.cfg.Features.EventTypes {
				return "needs watch event types: the features declare eventTypes: false"
			}
		case NeedRateLimit:
			if e.cfg.Features.RateLimit.QPS <= 0 {
				return "needs a declared rate limit: the features declare none (rateLimit.qps: 0)"
			}
		case NeedReflection:
			if !e.cfg.Features.Reflection {
				return "optional feature not declared: reflection"
			}
		case NeedHealth:
			if !e.cfg.Features.Health {
				return "optional feature not declared: health"
			}
		case NeedFieldMasks:
			if !e.cfg.Features.FieldMasks {
				return "needs field masks: the features declare fieldMasks: false"
			}
		case NeedSelectors:
			if !e.cfg.Features.Selectors {
				return "needs selectors (namespace, label_selector, field_selector): the features declare selectors: false"
			}
		case NeedWatchResume:
			if !e.cfg.Features.WatchResume {
				return "needs revisions and watch resume (resume_from): the features declare watchResume: false"
			}
		case NeedFindPods:
			if !e.cfg.Features.FindPods {
				return "needs FindPods: the features declare findPods: false"
			}
		case NeedFindWait:
			if !e.cfg.Features.FindWait {
				return "needs FindPods with a wait: the features declare findWait: false"
			}
		case NeedWorkloads:
			if !e.cfg.Features.Workloads {
				return "needs workloads in ListPods and WatchPods: the features declare workloads: false"
			}
		case NeedManifestStatus:
			if !e.cfg.Features.ManifestStatus {
				return "needs manifest statuses served as written: the features declare manifestStatus: false"
			}
		}
	}
	return ""
}

// deadlineSlack is how long before the case's deadline an implementation's
// DEADLINE_EXCEEDED still counts as the case timeout: the deadline travels
// with the case's calls (grpc-timeout), so the implementation may end a call
// a moment before the case's own timer has fired.
const deadlineSlack = 100 * time.Millisecond

// deadlineReached reports whether the case's context ran out: its timer
// fired, or its deadline has passed (on a busy machine the timer may fire
// after the failure it caused is seen), or the implementation ended a call
// with DEADLINE_EXCEEDED within deadlineSlack of it.
func deadlineReached(ctx context.Context, msg string) bool {
	if ctx.Err() == context.DeadlineExceeded {
		return true
	}
	dl, ok := ctx.Deadline()
	if !ok {
		return false
	}
	left := time.Until(dl)
	return left <= 0 || (left < deadlineSlack && strings.Contains(msg, "DEADLINE_EXCEEDED"))
}

// timeoutHint says which timeout a failure ran into and how to raise it:
// the case timeout when the case's context ran out, the event timeout when
// the message names it.
func (e *env) timeoutHint(caseExpired bool, timeout time.Duration, lifecycle bool) string {
	switch {
	case !caseExpired:
		return ""
	case lifecycle:
		return fmt.Sprintf("\ntimeout: the case's %s (the case timeout, %s, plus the start timeout, %s) ran out: raise them with --case-timeout and --start-timeout, or the features file's caseTimeout and startTimeout (an implementation that needs longer declares it there)",
			timeout, e.cfg.CaseTimeout, e.cfg.StartTimeout)
	default:
		return fmt.Sprintf("\ntimeout: the case timeout (%s) ran out: raise it with --case-timeout or the features file's caseTimeout (an implementation that needs longer declares it there)", timeout)
	}
}

// eventTimeoutHint is added to a failure that names the event timeout.
func (e *env) eventTimeoutHint(msg string) string {
	if !strings.Contains(msg, "within "+e.cfg.EventTimeout.String()) {
		return ""
	}
	return fmt.Sprintf("\ntimeout: the event timeout (%s) ran out: raise it with --event-timeout or the features file's eventTimeout (an implementation that needs longer declares it there)", e.cfg.EventTimeout)
}
