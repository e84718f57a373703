// Package stress runs the server as a child process and attacks it over its
// UNIX socket: floods, stalled watchers, connection churn and garbage. Each
// scenario checks its invariants; Run prints a table and reports the
// violated ones. Everything is bounded in count and time.
package stress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/internal/h2c"
	"github.com/podsapi/podsapi/podcgroup"
)

// Options size the scenarios.
type Options struct {
	// Flood: FloodClients call ListPods and GetPod as fast as they can for
	// Duration, against a limit of QPS and Burst, while Watchers read a
	// churn of ChurnRate changes per second; the same churn without the
	// flood is the latency baseline.
	Duration     time.Duration
	FloodClients int
	Watchers     int
	QPS          float64
	Burst        int
	ChurnRate    int
	// FloodDecode makes the flood clients decode their responses, as a
	// real agent would; by default they read them whole and discard them,
	// so that the CPU they take from the node is spent on calls.
	FloodDecode bool
	// RateLimitDelay is the server's --rate-limit-delay during the flood;
	// 0 leaves its default.
	RateLimitDelay time.Duration
	// FloodPerClientQPS is the server's --per-client-qps during the flood
	// (its burst is Burst). 0, the server's default, shares QPS fairly
	// among the clients calling: the flood and the victim may each take
	// half, and the victim's calls (one every 2*VictimInterval in the
	// flood, 25 a second) fit in its half. Negative turns the per-client
	// limit off: the shared bucket is first come first served.
	FloodPerClientQPS float64
	// Stalled: Stalled watchers never read and Readers read, under
	// UpdateRate changes per second for StallDuration.
	Stalled       int
	Readers       int
	UpdateRate    int
	StallDuration time.Duration
	StallTimeout  time.Duration
	// Churn: Cycles connect/call/disconnect cycles by ChurnWorkers.
	Cycles       int
	ChurnWorkers int
	// Garbage: GarbageConns hostile connections.
	GarbageConns int
	// Lockout: for LockoutDuration, an attacker keeps Slowloris silent
	// connections and HeldConns connections of HeldStreams streams whose
	// request never comes (the server's --request-read-timeout is
	// HeldTimeout), while a victim calls ListPods on a new connection every
	// VictimInterval.
	Slowloris       int
	HeldConns       int
	HeldStreams     int
	HeldTimeout     time.Duration
	LockoutDuration time.Duration
	VictimInterval  time.Duration
	// Resume herd: Herd watchers of HerdPods pods open at once, afresh
	// and then resuming HerdBack changes back, while HerdBack more changes
	// are made at HerdChurn per second, each herd given HerdTimeout to
	// sync: 1,000 watchers of 1,000 pods of 2.4 KB take about 30 s on two
	// cores (2.4 GB of snapshots), more when the machine is shared.
	Herd        int
	HerdPods    int
	HerdBack    int
	HerdChurn   int
	HerdTimeout time.Duration
	// Distinct masks: the pods carry MaskPadding bytes of annotation each.
	MaskPadding int
	// Distinct-mask CPU: MaskWatches watches with distinct masks over
	// MaskPods pods, under MaskChanges changes at 100 a second.
	MaskWatches, MaskPods, MaskChanges int
	// Unread answers: UnreadConns connections, one a second, each with
	// UnreadCalls calls whose answers are never read, over pods of
	// UnreadPadding bytes of annotation (50 of them).
	UnreadConns, UnreadCalls, UnreadPadding int
	// Log receives progress lines.
	Log io.Writer
}

// Defaults are the options of `make stress`.
func Defaults() Options {
	return Options{
		Duration: 30 * time.Second, FloodClients: 16, Watchers: 10, QPS: 100, Burst: 10, ChurnRate: 100,
		Stalled: 100, Readers: 10, UpdateRate: 1000, StallDuration: 10 * time.Second, StallTimeout: 2 * time.Second,
		Cycles: 10000, ChurnWorkers: 8, GarbageConns: 2000,
		Slowloris: 200, HeldConns: 4, HeldStreams: 50, HeldTimeout: time.Second, LockoutDuration: 10 * time.Second, VictimInterval: 20 * time.Millisecond,
		Herd: 1000, HerdPods: 1000, HerdBack: 1000, HerdChurn: 100, HerdTimeout: 90 * time.Second,
		MaskPadding: 200 << 10,
		MaskWatches: 900, MaskPods: 1000, MaskChanges: 1000,
		UnreadConns: 15, UnreadCalls: 100, UnreadPadding: 200 << 10,
		Log: io.Discard,
	}
}

// Row is one line of the report.
type Row struct {
	Scenario, Check, Value, Limit string
	OK                            bool
}

// Report is the outcome of Run.
type Report struct{ Rows []Row }

func (r *Report) add(scenario, check string, ok bool, value, limit string) {
	r.Rows = append(r.Rows, Row{scenario, check, value, limit, ok})
}

// Failed returns the violated checks.
func (r *Report) Failed() []Row {
	var failed []Row
	for _, row := range r.Rows {
		if !row.OK {
			failed = append(failed, row)
		}
	}
	return failed
}

// Print writes the report as a table.
func (r *Report) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tCHECK\tVALUE\tLIMIT\tRESULT")
	for _, row := range r.Rows {
		res := "ok"
		if !row.OK {
			res = "VIOLATED"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", row.Scenario, row.Check, row.Value, row.Limit, res)
	}
	tw.Flush()
}

// limit is the memory limit of the stress servers of a Run.
var limit = &memoryLimit{Note: "none"}

// Run runs the scenarios named in which (flood, stalled, churn, garbage,
// lockout, fairness, snapshots, resume, masks, maskcpu, unread; all when empty) and returns
// the report; err is set when a scenario could not run at all. The stress
// servers run under a memory limit of 256 MiB (see childMemoryMax).
func Run(ctx context.Context, o Options, which ...string) (*Report, error) {
	rep := &Report{}
	limit = newMemoryLimit()
	defer limit.remove()
	fmt.Fprintf(o.Log, "stress: memory limit: %s\n", limit.Note)
	all := []struct {
		name string
		run  func(context.Context, Options, *Report) error
	}{{"flood", flood}, {"stalled", stalled}, {"churn", churn}, {"garbage", garbage}, {"lockout", lockout}, {"fairness", fairness}, {"snapshots", snapshots}, {"resume", resumeHerd}, {"masks", maskAttack}, {"maskcpu", maskCPU}, {"unread", unread}}
	for _, s := range all {
		if len(which) > 0 && !contains(which, s.name) {
			continue
		}
		fmt.Fprintf(o.Log, "stress: %s\n", s.name)
		if err := s.run(ctx, o, rep); err != nil {
			return rep, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	if n := limit.oomKills(); n >= 0 {
		rep.add("memory", "OOM kills of the stress servers in their cgroup", n == 0, strconv.Itoa(n), "0")
	}
	return rep, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// flood checks the shared rate limit under 16 greedy clients of one
// process (one client to the server), that watchers lose nothing and stay
// fast meanwhile, and that the victim keeps its calls: the flood may take
// its share of the shared bucket (by default the server's fair share, half
// while the victim calls), not the victim's. It ends with a SIGTERM under that watch load.
func flood(ctx context.Context, o Options, rep *Report) error {
	const name = "1 flood"
	c, err := startChild("--qps", fmt.Sprint(o.QPS), "--burst", fmt.Sprint(o.Burst), "--rate-limit-delay", o.RateLimitDelay.String(),
		"--per-client-qps", fmt.Sprint(o.FloodPerClientQPS), "--per-client-burst", fmt.Sprint(o.Burst))
	if err != nil {
		return err
	}
	defer c.kill()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	readers := make([]*reader, o.Watchers)
	for i := range readers {
		readers[i] = startReader(wctx, c.socket)
		select {
		case <-readers[i].synced:
		case <-time.After(30 * time.Second):
			return fmt.Errorf("watcher %d did not sync: %v", i, readers[i].endErr())
		}
	}
	// The victim calls through the baseline (its quiet) and the flood, at
	// half its pace elsewhere (25 calls a second by default): within its
	// fair share, half the shared 100 a second.
	v, err := startVictim(ctx, c, 2*o.VictimInterval, false)
	if err != nil {
		return err
	}
	defer v.kill()
	churnN := max(int(o.Duration.Seconds()*float64(o.ChurnRate)), 1)
	// The baseline is the same churn without the flood, half of it before
	// the flood and half after, so that a drift of the machine's speed
	// during the run weighs on both sides alike.
	var base, floodedLatencies []time.Duration
	changes := 0
	phase := func(n int, into *[]time.Duration) {
		changes += n
		for _, r := range readers {
			r.waitModified(changes, time.Minute)
			*into = append(*into, r.takeLatencies()...)
		}
	}
	before := churnN / 2
	if err := v.start(); err != nil {
		return err
	}
	if err := c.churn(before, o.ChurnRate); err != nil {
		return err
	}
	phase(before, &base)
	quiet, err := v.end()
	if err != nil {
		return err
	}
	// The flood, with the same churn. The flooding clients run in a process
	// of their own, as hostile agents do, so that the watchers' process
	// holds only what is measured.
	fl, err := startFlood(ctx, c.socket, o.FloodClients, o.FloodDecode, 2*o.Duration+2*time.Minute)
	if err != nil {
		return err
	}
	defer fl.kill()
	if err := v.start(); err != nil {
		return err
	}
	meter := meterCPU(c, processCPU(fl.proc.Pid()))
	start := time.Now()
	churnErr := c.churn(churnN, o.ChurnRate)
	if rest := time.Until(start.Add(o.Duration)); rest > 0 {
		time.Sleep(rest) // the flood lasts at least Duration
	}
	meter.row(rep, name)
	flooded, err := v.end()
	if err != nil {
		return err
	}
	res, err := fl.stop()
	if err != nil {
		return err
	}
	if err := v.close(); err != nil {
		return err
	}
	if churnErr != nil {
		return churnErr
	}
	if res.Elapsed < o.Duration {
		return fmt.Errorf("the flood lasted %v, less than %v", res.Elapsed, o.Duration)
	}
	elapsed := res.Elapsed
	calls := res.Accepted + res.Limited + res.Other
	fmt.Fprintf(o.Log, "stress: flood: %d calls in %v (%.0f/s), %d accepted\n",
		calls, elapsed.Round(time.Millisecond), float64(calls)/elapsed.Seconds(), res.Accepted)
	phase(churnN, &floodedLatencies)
	if err := c.churn(churnN-before, o.ChurnRate); err != nil {
		return err
	}
	phase(churnN-before, &base)
	lost := 0
	for _, r := range readers {
		r.mu.Lock()
		lost += 2*churnN - r.modified + r.gaps
		r.mu.Unlock()
	}
	// The shared bucket: the flood's calls and the victim's, made within
	// the flood.
	bound := int64(o.QPS*elapsed.Seconds()) + int64(o.Burst)
	accepted := res.Accepted + int64(flooded.Lists.OK)
	rep.add(name, fmt.Sprintf("accepted ListPods+GetPod of %d clients and the victim in %v", o.FloodClients, elapsed.Round(time.Millisecond)),
		accepted <= bound, fmt.Sprintf("%d + %d of %d + %d calls (%.0f/s)", res.Accepted, flooded.Lists.OK, calls, flooded.Lists.OK+flooded.Lists.Failed, float64(calls)/elapsed.Seconds()),
		fmt.Sprintf("<= qps*t+burst = %d", bound))
	rep.add(name, "rejections that are RESOURCE_EXHAUSTED", res.Other == 0,
		fmt.Sprintf("%d of %d", res.Limited, res.Limited+res.Other), "all")
	if res.OtherErr != "" {
		fmt.Fprintf(o.Log, "stress: flood: other error: %v\n", res.OtherErr)
	}
	rep.add(name, fmt.Sprintf("events lost by %d watchers (%d changes each)", o.Watchers, 2*churnN), lost == 0, fmt.Sprint(lost), "0")
	victimRows(rep, name, quiet, flooded, fmt.Sprintf("--per-client-qps %g, every %v", o.FloodPerClientQPS, 2*o.VictimInterval))
	pb, pf := p99(base), p99(floodedLatencies)
	// A floor of 1 ms keeps scheduler noise at microsecond latencies from
	// deciding the check.
	rep.add(name, "watch delivery p99 flooded vs not", pf <= 2*max(pb, time.Millisecond),
		fmt.Sprintf("%v vs %v (%.2fx)", pf.Round(time.Microsecond), pb.Round(time.Microsecond), float64(pf)/float64(max(pb, 1))),
		"<= 2x (floor 1ms)")

	// SIGTERM under watch load: every watch ends UNAVAILABLE, the exit is
	// bounded and the socket removed.
	go c.churn(100000, o.ChurnRate*10)
	took, err := c.stop(10 * time.Second)
	rep.add(name, "SIGTERM with watches open: exit 0, socket removed", err == nil, took.Round(time.Millisecond).String(), "< 10s")
	unavailable := 0
	for _, r := range readers {
		<-r.done
		if connect.CodeOf(r.endErr()) == connect.CodeUnavailable {
			unavailable++
		}
	}
	rep.add(name, "watches ended UNAVAILABLE by SIGTERM", unavailable == len(readers), fmt.Sprintf("%d of %d", unavailable, len(readers)), "all")
	if err != nil {
		fmt.Fprintln(o.Log, "stress:", err)
	}
	return nil
}

// stalled checks that watchers that never read are dropped and freed in a
// bounded time while readers lose nothing, and that memory comes back. It
// runs the same round twice on one server: what the first round leaves in
// the heap is then either kept for reuse (a second round adds nothing) or
// a leak (it adds as much again).
func stalled(ctx context.Context, o Options, rep *Report) error {
	const name = "2 stalled"
	c, err := startChild("--qps", "-1", "--write-stall-timeout", o.StallTimeout.String())
	if err != nil {
		return err
	}
	defer c.kill()
	// history is what the store keeps on purpose for watchers that
	// resume (issue 16), bounded by --watch-history-bytes: it is not
	// memory the stalled watchers failed to give back.
	type memory struct{ rss, heap, stacks, history int64 }
	measure := func() (memory, error) {
		if err := c.gc(); err != nil {
			return memory{}, err
		}
		// Live bytes after a GC, exact; the heap in use would add the
		// fragmentation of the history's ring of pods, replaced change
		// by change.
		heap, err := c.metric("go_memstats_heap_alloc_bytes")
		if err != nil {
			return memory{}, err
		}
		history, err := c.metric("podsapi_watch_history_bytes")
		if err != nil {
			return memory{}, err
		}
		stacks, err := c.metric("go_memstats_stack_inuse_bytes")
		return memory{c.rss(), int64(heap), int64(stacks), int64(history)}, err
	}
	v, quiet, err := startQuietVictim(ctx, c, o)
	if err != nil {
		return err
	}
	defer v.kill()
	before, err := measure()
	if err != nil {
		return err
	}
	if err := v.start(); err != nil {
		return err
	}
	meter := meterCPU(c, selfCPU)
	var after [2]memory
	var rssPeak int64
	for i := range after {
		r, err := stalledRound(ctx, c, o)
		if err != nil {
			return err
		}
		rssPeak = max(rssPeak, r.rssPeak)
		if i == 0 {
			rep.add(name, fmt.Sprintf("%d stalled watchers dropped and freed (%d changes at %d/s)", o.Stalled, r.changes, o.UpdateRate),
				r.freedAfter >= 0 && r.freedAfter <= r.bound, fmt.Sprintf("after %v (%v events dropped, %v streams reset)", r.freedAfter.Round(time.Millisecond), r.dropped, r.reset),
				fmt.Sprintf("<= %v", r.bound))
			rep.add(name, fmt.Sprintf("events lost by %d readers", o.Readers), r.lost == 0, fmt.Sprint(r.lost), "0")
		} else {
			rep.add(name, "the same again on the same server: dropped and freed, nothing lost",
				r.freedAfter >= 0 && r.freedAfter <= r.bound && r.lost == 0,
				fmt.Sprintf("after %v, %d lost", r.freedAfter.Round(time.Millisecond), r.lost), fmt.Sprintf("<= %v, 0", r.bound))
		}
		if after[i], err = measure(); err != nil {
			return err
		}
	}
	// The history's pods are replaced change by change, which leaves
	// their spans partly used: a quarter more is allowed for it.
	limit := before.rss + before.rss/4 + 16<<20 + after[1].history + after[1].history/4
	rep.add(name, "server RSS before / peak / after (history kept for resuming watchers)", after[1].rss <= limit,
		fmt.Sprintf("%s / %s / %s (%s)", mib(before.rss), mib(rssPeak), mib(after[1].rss), mib(after[1].history)), fmt.Sprintf("after <= %s", mib(limit)))
	// The live heap and the stacks in use say what of the RSS is still
	// used, the rest being memory the runtime keeps for reuse. The first round leaves
	// one-time initialisations, the views of the current pods and records of
	// dead goroutines (kept for reuse up to the peak number of goroutines);
	// a second round must not leave as much again. The heap varies by a few
	// hundred KiB from round to round: the slack catches a leak of 10 KiB
	// or more per dropped watcher (at 100 of them).
	const slack = 1 << 20
	kib := func(b int64) string { return fmt.Sprintf("%d KiB", b>>10) }
	meter.row(rep, name)
	under, err := v.finish()
	if err != nil {
		return err
	}
	victimRows(rep, name, quiet, under, "")
	rep.add(name, "server live heap before / after 1 round / after 2, less the history", after[1].heap-after[1].history <= after[0].heap-after[0].history+slack,
		fmt.Sprintf("%s / %s / %s (history %s / %s / %s, stacks %s / %s / %s)", kib(before.heap), kib(after[0].heap-after[0].history), kib(after[1].heap-after[1].history),
			kib(before.history), kib(after[0].history), kib(after[1].history),
			kib(before.stacks), kib(after[0].stacks), kib(after[1].stacks)),
		fmt.Sprintf("after 2 <= after 1 + %s", kib(slack)))
	_, err = c.stop(10 * time.Second)
	return err
}

// round is the outcome of one stalledRound.
type round struct {
	changes        int
	freedAfter     time.Duration // -1: not within bound
	bound          time.Duration
	lost           int
	rssPeak        int64
	dropped, reset float64 // during the round
}

// stalledRound opens o.Readers watchers that read and o.Stalled that never
// read, changes pods at o.UpdateRate for o.StallDuration, waits until every
// stalled watcher is dropped and freed, and closes every watcher.
func stalledRound(ctx context.Context, c *child, o Options) (round, error) {
	r := round{changes: int(o.StallDuration.Seconds() * float64(o.UpdateRate)), freedAfter: -1,
		bound: o.StallDuration + o.StallTimeout*2 + 5*time.Second}
	droppedBefore, _ := c.metric("kubelet_pod_watch_events_dropped_total")
	resetBefore, _ := c.metric("podsapi_stalled_streams_reset_total")
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	readers := make([]*reader, o.Readers)
	for i := range readers {
		readers[i] = startReader(wctx, c.socket)
		<-readers[i].synced
	}
	var closers []func()
	defer func() {
		for _, f := range closers {
			f()
		}
	}()
	for range o.Stalled {
		closeIt, err := stalledWatcher(wctx, c.socket)
		if err != nil {
			return r, err
		}
		closers = append(closers, closeIt)
	}
	// The watches of the round are the harness's: the victim's, opened
	// and closed all along, are left out.
	victim := podcgroup.Client(victimCgroup)
	watches := func() (float64, error) { return c.watchesBesides(victim) }
	want := float64(o.Readers + o.Stalled)
	if _, v, err := waitValue("watches open", watches, func(v float64) bool { return v == want }, 30*time.Second); err != nil {
		return r, fmt.Errorf("watches open: %v, want %v: %w", v, want, err)
	}
	churned := make(chan error, 1)
	start := time.Now()
	go func() { churned <- c.churn(r.changes, o.UpdateRate) }()
	// Every stalled watcher is dropped (queue overflow) and its stream freed
	// (write-stall timeout): only the readers remain.
	for time.Since(start) < r.bound+o.StallDuration {
		r.rssPeak = max(r.rssPeak, c.rss())
		v, err := watches()
		if err != nil {
			return r, err
		}
		if v == float64(o.Readers) {
			r.freedAfter = time.Since(start)
			break
		}
		time.Sleep(100 * time.Millisecond) // sampling RSS and the metric
	}
	if err := <-churned; err != nil {
		return r, err
	}
	r.rssPeak = max(r.rssPeak, c.rss())
	dropped, _ := c.metric("kubelet_pod_watch_events_dropped_total")
	reset, _ := c.metric("podsapi_stalled_streams_reset_total")
	r.dropped, r.reset = dropped-droppedBefore, reset-resetBefore
	for _, rd := range readers {
		got := rd.waitModified(r.changes, time.Minute)
		rd.mu.Lock()
		r.lost += r.changes - got + rd.gaps
		rd.mu.Unlock()
	}
	for _, f := range closers {
		f()
	}
	closers = nil
	cancel()
	for _, rd := range readers {
		<-rd.done
	}
	if _, _, err := waitValue("watches open", watches, func(v float64) bool { return v == 0 }, 30*time.Second); err != nil {
		return r, err
	}
	return r, nil
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// churn runs connect/call/disconnect cycles, some closed abruptly in the
// middle of a watch or a call, and checks that goroutines and file
// descriptors come back and that the victim is served meanwhile. The
// cycles run in this process, confined to attackerCPU while they run.
func churn(ctx context.Context, o Options, rep *Report) error {
	const name = "3 churn"
	c, err := startChild("--qps", "-1")
	if err != nil {
		return err
	}
	defer c.kill()
	// Warm up: one cycle of each kind, so that lazily started goroutines
	// count in the baseline.
	cycle(ctx, c.socket, 0)
	cycle(ctx, c.socket, 1)
	if _, _, err := c.waitMetric("podsapi_connections_open", func(v float64) bool { return v == 0 }, 30*time.Second); err != nil {
		return err
	}
	v, quiet, err := startQuietVictim(ctx, c, o)
	if err != nil {
		return err
	}
	defer v.kill()
	g0, _ := c.metric("go_goroutines")
	fd0 := c.fds()
	cpu := newCPULimit(attackerCPU)
	defer cpu.remove()
	release, err := cpu.confineSelf()
	if err != nil {
		return err
	}
	if err := v.start(); err != nil {
		return err
	}
	meter := meterCPU(c, selfCPU)
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range o.ChurnWorkers {
		wg.Go(func() {
			for {
				k := next.Add(1)
				if k > int64(o.Cycles) || ctx.Err() != nil {
					return
				}
				if err := cycle(ctx, c.socket, int(k)); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	meter.row(rep, name)
	release()
	under, err := v.finish()
	if err != nil {
		return err
	}
	if _, _, err := c.waitMetric("podsapi_connections_open", func(v float64) bool { return v == 0 }, 30*time.Second); err != nil {
		return err
	}
	_, g1, _ := c.waitMetric("go_goroutines", func(v float64) bool { return v <= g0 }, 30*time.Second)
	fd1 := c.fds()
	rep.add(name, fmt.Sprintf("%d cycles (1 in 10 closed abruptly mid-watch, 1 in 10 mid-call) in %v (%s)", o.Cycles, took.Round(time.Millisecond), cpu.Note),
		failed.Load() == 0, fmt.Sprintf("%d failed", failed.Load()), "0 failed")
	victimRows(rep, name, quiet, under, cpu.Note)
	rep.add(name, "server goroutines before / after", g1 <= g0, fmt.Sprintf("%v / %v", g0, g1), "no growth")
	rep.add(name, "server file descriptors before / after", fd1 <= fd0, fmt.Sprintf("%d / %d", fd0, fd1), "no growth")
	_, err = c.stop(10 * time.Second)
	return err
}

// cycle is one connect/call/disconnect cycle; kind k%10 == 1 closes the
// connection abruptly in the middle of a watch, k%10 == 2 in the middle of
// a call.
func cycle(ctx context.Context, socket string, k int) error {
	hc, conns := dialer(socket)
	defer hc.CloseIdleConnections()
	cl := podsv1alpha1connect.NewPodsClient(hc, h2c.BaseURL, connect.WithGRPC())
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	switch k % 10 {
	case 1:
		s, err := cl.WatchPods(cctx, connect.NewRequest(&podsv1alpha1.PodWatchRequest{}))
		if err != nil {
			return err
		}
		if !s.Receive() {
			return s.Err()
		}
		for _, conn := range conns() {
			conn.Close()
		}
		return nil
	case 2:
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = cl.ListPods(cctx, connect.NewRequest(&podsv1alpha1.PodListRequest{}))
		}()
		for len(conns()) == 0 {
			select {
			case <-done:
				return nil
			default:
				time.Sleep(50 * time.Microsecond) // until the dial happened
			}
		}
		for _, conn := range conns() {
			conn.Close()
		}
		<-done
		return nil
	default:
		_, err := cl.ListPods(cctx, connect.NewRequest(&podsv1alpha1.PodListRequest{}))
		return err
	}
}

// garbage sends hostile bytes while a client keeps calling and watching: the
// server must keep serving, never crash and never log an error.
func garbage(ctx context.Context, o Options, rep *Report) error {
	const name = "4 garbage"
	c, err := startChild("--qps", "-1")
	if err != nil {
		return err
	}
	defer c.kill()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := startReader(wctx, c.socket)
	<-r.synced
	v, quiet, err := startQuietVictim(ctx, c, o)
	if err != nil {
		return err
	}
	defer v.kill()
	// The hostile connections are made by this process, as the churn's
	// cycles are, confined to attackerCPU while it makes them: unconfined
	// they took 0.64 cores of the two beside the victim.
	cpu := newCPULimit(attackerCPU)
	defer cpu.remove()
	release, err := cpu.confineSelf()
	if err != nil {
		return err
	}
	if err := v.start(); err != nil {
		release()
		return err
	}
	meter := meterCPU(c, selfCPU)
	var calls, callFailures atomic.Int64
	var firstFailure atomic.Value
	checkerDone := make(chan struct{})
	go func() {
		defer close(checkerDone)
		cl, closeConns := newClient(c.socket)
		defer closeConns()
		for wctx.Err() == nil {
			_, err := cl.ListPods(wctx, connect.NewRequest(&podsv1alpha1.PodListRequest{}))
			if wctx.Err() != nil {
				return
			}
			calls.Add(1)
			if err != nil {
				callFailures.Add(1)
				firstFailure.CompareAndSwap(nil, err.Error())
			}
			time.Sleep(2 * time.Millisecond) // a steady client, not a flood
		}
	}()
	counts := make([]atomic.Int64, len(garbageKinds))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				k := next.Add(1)
				if k > int64(o.GarbageConns) || ctx.Err() != nil {
					return
				}
				i := int(k) % len(garbageKinds)
				garbageKinds[i].send(c.socket, int(k))
				counts[i].Add(1)
			}
		})
	}
	wg.Wait()
	meter.row(rep, name)
	release()
	under, err := v.finish()
	if err != nil {
		return err
	}
	victimRows(rep, name, quiet, under, cpu.Note)
	// The watcher still gets changes.
	if err := c.churn(100, 1000); err != nil {
		return err
	}
	got := r.waitModified(100, 30*time.Second)
	cancel()
	<-checkerDone
	var kinds []string
	for i, g := range garbageKinds {
		kinds = append(kinds, fmt.Sprintf("%s %d", g.name, counts[i].Load()))
	}
	fmt.Fprintf(o.Log, "stress: garbage: %s\n", strings.Join(kinds, ", "))
	rep.add(name, fmt.Sprintf("%d hostile connections of %d kinds: well-behaved calls failed", o.GarbageConns, len(garbageKinds)),
		callFailures.Load() == 0, fmt.Sprintf("%d of %d", callFailures.Load(), calls.Load()), "0")
	if v := firstFailure.Load(); v != nil {
		fmt.Fprintf(o.Log, "stress: garbage: first failure: %v\n", v)
	}
	rep.add(name, "watcher received changes after the garbage", got == 100 && r.gaps == 0, fmt.Sprintf("%d of 100", got), "all")
	took, err := c.stop(10 * time.Second)
	rep.add(name, "server alive to the end, clean exit on SIGTERM", err == nil, took.Round(time.Millisecond).String(), "exit 0")
	bad := c.badLogs()
	rep.add(name, "log lines at error level or about panics", len(bad) == 0, fmt.Sprint(len(bad)), "0")
	for _, line := range bad[:min(len(bad), 5)] {
		fmt.Fprintf(o.Log, "stress: garbage: logged: %s\n", line)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(o.Log, "stress:", err)
	}
	return nil
}
