package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/test/childproc"
)

// Idle wakeups (issue 15): with no load, a server should wake only for the
// keepalives of its connections. The measurement counts the context
// switches of every thread of the server's process over a window, in three
// states, for our server and for floor-rpc (an http.Server with no
// goroutine of its own: the Go runtime's baseline).

// Wakeup states.
const (
	wakeNone     = "no connections"
	wakeConns    = "idle connections"
	wakeWatchers = "idle watchers"
)

// wakeupConns and wakeupWatchers are the sizes of the idle states.
const (
	wakeupConns    = 10
	wakeupWatchers = 100
)

// wakeupState is one idle state of one implementation over the window.
type wakeupState struct {
	Impl        string `json:"impl"`
	State       string `json:"state"`
	Connections int    `json:"connections"`
	Watchers    int    `json:"watchers"`
	Threads     int    `json:"threads"`
	// Settle is how long the state was left alone before the window, and
	// Seconds the length of the window.
	Settle  float64 `json:"settleSeconds"`
	Seconds float64 `json:"seconds"`
	// Switches is the sum over the threads of voluntary_ctxt_switches and
	// nonvoluntary_ctxt_switches (/proc/PID/task/*/status) over the window:
	// every time a thread went to sleep or was preempted, so about one per
	// wakeup of a thread.
	Switches      int64   `json:"contextSwitches"`
	WakeupsPerSec float64 `json:"wakeupsPerSec"`
	// TimeslicesPerSec is the third field of /proc/PID/task/*/schedstat
	// (timeslices run on a CPU) per second, -1 when the kernel has none.
	TimeslicesPerSec float64 `json:"timeslicesPerSec"`
	// CPUUsPerSec is utime+stime (/proc/PID/stat, 10 ms ticks) per second.
	CPUUsPerSec float64 `json:"cpuUsPerSec"`
	// RunUsPerSec is the time on a CPU from schedstat (ns precision) per
	// second, -1 when the kernel has none.
	RunUsPerSec float64 `json:"runUsPerSec"`
}

// procSample is the cumulative scheduling counters of a process.
type procSample struct {
	switches   int64
	timeslices int64 // -1: no schedstat
	runNs      int64 // -1: no schedstat
	cpu        time.Duration
	threads    int
}

// sampleProc sums the scheduling counters of the threads of pid. A thread
// that exits takes its counters with it: the harness's children keep their
// threads, as Go processes do.
func sampleProc(pid int) (procSample, error) {
	s := procSample{}
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return s, err
	}
	haveSched := true
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "status"))
		if err != nil {
			continue // the thread exited
		}
		s.threads++
		for l := range strings.SplitSeq(string(b), "\n") {
			k, v, ok := strings.Cut(l, ":")
			if ok && (k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches") {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				s.switches += n
			}
		}
		b, err = os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if f := strings.Fields(string(b)); err == nil && len(f) == 3 {
			run, _ := strconv.ParseInt(f[0], 10, 64)
			slices, _ := strconv.ParseInt(f[2], 10, 64)
			s.runNs += run
			s.timeslices += slices
		} else {
			haveSched = false
		}
	}
	if s.threads == 0 {
		return s, errors.New("no thread in " + dir)
	}
	if !haveSched {
		s.runNs, s.timeslices = -1, -1
	}
	s.cpu, err = childproc.CPU(pid)
	return s, err
}

// measureWakeups waits settle, then counts the wakeups of pid over window.
func measureWakeups(ctx context.Context, pid int, settle, window time.Duration) (wakeupState, error) {
	var w wakeupState
	if err := sleepCtx(ctx, settle); err != nil {
		return w, err
	}
	s0, err := sampleProc(pid)
	if err != nil {
		return w, err
	}
	t0 := time.Now()
	if err := sleepCtx(ctx, window); err != nil {
		return w, err
	}
	s1, err := sampleProc(pid)
	if err != nil {
		return w, err
	}
	sec := time.Since(t0).Seconds()
	w.Settle, w.Seconds = settle.Seconds(), sec
	w.Threads = s1.threads
	w.Switches = max(s1.switches-s0.switches, 0)
	w.WakeupsPerSec = float64(w.Switches) / sec
	w.CPUUsPerSec = us(s1.cpu-s0.cpu) / sec
	w.TimeslicesPerSec, w.RunUsPerSec = -1, -1
	if s0.runNs >= 0 && s1.runNs >= 0 {
		w.TimeslicesPerSec = float64(max(s1.timeslices-s0.timeslices, 0)) / sec
		w.RunUsPerSec = float64(max(s1.runNs-s0.runNs, 0)) / 1e3 / sec
	}
	return w, nil
}

// sleepCtx waits d: the harness's measurement windows are times, not
// synchronisation.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// idleConns opens n client connections to socket and makes one call on each
// (method with an empty request), so that each is established and then idle.
func idleConns(ctx context.Context, socket, method string, n int) ([]*grpc.ClientConn, error) {
	var conns []*grpc.ClientConn
	for range n {
		c, err := grpcConn(socket)
		if err != nil {
			closeConns(conns)
			return nil, err
		}
		conns = append(conns, c)
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		var resp []byte
		err = c.Invoke(cctx, method, []byte{}, &resp)
		if err == nil {
			err = awaitReady(cctx, c)
		}
		cancel()
		if err != nil {
			closeConns(conns)
			return nil, fmt.Errorf("call %s: %w", method, err)
		}
	}
	return conns, nil
}

// awaitReady waits until c reports READY. grpc-go hands a new connection to
// calls before it reports the connection's state, so a call can succeed
// while the state still says CONNECTING; a connection that failed says
// TRANSIENT_FAILURE or SHUTDOWN instead.
func awaitReady(ctx context.Context, c *grpc.ClientConn) error {
	for {
		s := c.GetState()
		switch s {
		case connectivity.Ready:
			return nil
		case connectivity.TransientFailure, connectivity.Shutdown:
			return fmt.Errorf("connection %v after a call", s)
		}
		if !c.WaitForStateChange(ctx, s) {
			return fmt.Errorf("connection still %v after a call: %w", s, ctx.Err())
		}
	}
}

func closeConns(conns []*grpc.ClientConn) {
	for _, c := range conns {
		c.Close()
	}
}

// runWakeups measures the idle wakeups of impl (ours or floor-rpc) in each
// state: no connection, wakeupConns idle connections, and wakeupWatchers
// idle watchers (ours) or idle connections (floor-rpc, which has no
// watch), each after settle.
func runWakeups(ctx context.Context, o childOptions, impl string, pods int, settle, window time.Duration) ([]wakeupState, error) {
	c, err := startChild(ctx, o, impl, pods)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	pid := c.pid()
	var out []wakeupState
	add := func(state string, conns, watchers int) error {
		w, err := measureWakeups(ctx, pid, settle, window)
		if err != nil {
			return fmt.Errorf("%s: %w", state, err)
		}
		w.Impl, w.State, w.Connections, w.Watchers = impl, state, conns, watchers
		out = append(out, w)
		return nil
	}
	if err := add(wakeNone, 0, 0); err != nil {
		return out, err
	}
	method := methodList
	if impl == ImplFloorRPC {
		method = methodEmpty
	}
	conns, err := idleConns(ctx, c.socket, method, wakeupConns)
	if err != nil {
		return out, err
	}
	err = add(wakeConns, wakeupConns, 0)
	closeConns(conns)
	if err != nil {
		return out, err
	}
	if impl == ImplFloorRPC {
		conns, err := idleConns(ctx, c.socket, method, wakeupWatchers)
		if err != nil {
			return out, err
		}
		defer closeConns(conns)
		return out, add(wakeWatchers, wakeupWatchers, 0)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, closeAll, err := openWatchers(wctx, c.socket, wakeupWatchers, 1, 120*time.Second)
	if closeAll != nil {
		defer closeAll()
	}
	if err != nil {
		return out, err
	}
	return out, add(wakeWatchers, wakeupWatchers, wakeupWatchers)
}

// switchesPerWake is the budget of one keepalive in context switches: an event wakes the netpoller's thread and a worker, and sysmon,
// which sleeps until the next timer, wakes with it and polls every 20 µs
// while a P runs. The stall reaper's tick (the only timer of an idle server
// without connections) measured 3 to 30 switches per tick on a 2-core
// machine; 30 is the budget.
const switchesPerWake = 30

// wakeupAllowance is the runtime's own background work allowed beyond the
// floor, in wakeups per second: the forced GC every 2 minutes and its
// scavenging, which a 10 s window may or may not see.
const wakeupAllowance = 0.5

// keepaliveBudget is the wakeups per second that the server's keepalives
// may cause in the window of w: a connection is pinged after
// server.DefaultKeepaliveInterval of silence, so each of w's connections,
// silent since the settle began, is pinged at most once per interval of
// the settle and the window. In the long run that is conns/60 pings per
// second; a window that ends less than an interval after the connections
// were last used holds no ping at all.
func keepaliveBudget(w wakeupState) float64 {
	if w.Seconds <= 0 {
		return 0
	}
	pings := math.Floor((w.Settle + w.Seconds) / server.DefaultKeepaliveInterval.Seconds())
	return float64(w.Connections) * pings * switchesPerWake / w.Seconds
}

// wakeupFloor returns the floor-rpc measurement of state, or nil.
func (r *Results) wakeupFloor(state string) *wakeupState {
	for i := range r.Wakeups {
		if w := &r.Wakeups[i]; w.Impl == ImplFloorRPC && w.State == state {
			return w
		}
	}
	return nil
}

// wakeupsBeyondKeepalives is the largest, over the states, of our wakeups
// per second minus floor-rpc's (the runtime's baseline) minus the keepalive
// budget of the state's connections, with the state it was found in; NaN
// when not measured.
func wakeupsBeyondKeepalives(r *Results) (float64, string) {
	v, at := math.NaN(), ""
	for _, w := range r.Wakeups {
		f := r.wakeupFloor(w.State)
		if w.Impl != ImplOurs || f == nil {
			continue
		}
		x := w.WakeupsPerSec - f.WakeupsPerSec - keepaliveBudget(w)
		if math.IsNaN(v) || x > v {
			v, at = x, w.State
		}
	}
	return v, at
}

// wakeupsTable reports the idle wakeups of each state, ours against floor.
func wakeupsTable(r *Results) string {
	if len(r.Wakeups) == 0 {
		return "not measured\n"
	}
	var sb strings.Builder
	sb.WriteString("| impl | state | connections | watchers | threads | wakeups/s | timeslices/s | CPU µs/s (stat) | CPU µs/s (schedstat) | ours − floor, wakeups/s | keepalive budget/s |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, w := range r.Wakeups {
		diff, budget := "", ""
		if f := r.wakeupFloor(w.State); w.Impl == ImplOurs && f != nil {
			diff = fmt.Sprintf("%.2f", w.WakeupsPerSec-f.WakeupsPerSec)
			budget = fmt.Sprintf("%.2f", keepaliveBudget(w))
		}
		fmt.Fprintf(&sb, "| %s | %s | %d | %d | %d | %.2f | %.2f | %.1f | %.1f | %s | %s |\n",
			w.Impl, w.State, w.Connections, w.Watchers, w.Threads, w.WakeupsPerSec, w.TimeslicesPerSec, w.CPUUsPerSec, w.RunUsPerSec, diff, budget)
	}
	return sb.String()
}

// wakeupsText explains the wakeup measurement and its target.
func wakeupsText(r *Results) string {
	return fmt.Sprintf(`Our server and floor-rpc (an h2c http.Server with no keepalive, no deadline, and no goroutine or timer of
its own beyond the harness's child, which ours has too: the Go runtime's baseline) each in a child process,
left alone for a settle of %v (longer than the %v request deadline that the last calls armed: the one
timer a burst of calls leaves behind) and then measured over
%v in three states: no connection; %d idle grpc-go connections, each after one call (grpc-go sends no
keepalive ping by default); %d idle watchers that have received their initial sync, one connection each
(floor-rpc, which has no watch: %d idle connections). A wakeup is a context switch of any thread of the
process (voluntary + nonvoluntary, /proc/PID/task/*/status); CPU is utime+stime (/proc/PID/stat, 10 ms
ticks) and the time on a CPU from /proc/PID/task/*/schedstat (ns).

The target allows, beyond floor-rpc's wakeups in the same state, the keepalives and %.1f/s for the
runtime's own background work (the forced GC every 2 minutes). A connection is pinged after %v of silence
(server.DefaultKeepaliveInterval): conns/60 pings per second in the long run, and none in a window that
ends less than a minute after the connections were last used (the budget column counts the pings that
can fall in the settle and window, at %d context switches each: a timer event wakes the netpoller's
thread and a worker, and sysmon, which sleeps until the next timer and then polls every 20 µs while a P
runs; 3 to 30 switches per event were measured). Reproduce with `+"`go run ./test/cmd/bench --only wakeups`"+`.

%s`, r.Options.WakeupSettle, server.DefaultRequestReadTimeout, r.Options.WakeupWindow, wakeupConns, wakeupWatchers, wakeupWatchers,
		wakeupAllowance, server.DefaultKeepaliveInterval, switchesPerWake, wakeupsTable(r))
}
