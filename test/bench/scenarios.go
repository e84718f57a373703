package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/podsapi/podsapi/test/podstest"
)

// The scenarios of a run: runBench starts the servers in child processes,
// drives each section (--only) against ours and the baselines, and collects
// the Results that report.go writes out.

// getRequest returns the PodGetRequest of the middle one of pods synthetic
// pods.
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
	// podsapi-server's own binary and idle memory.
	if o.runs("footprint") && ctx.Err() == nil {
		f, err := runFootprint(ctx, dir)
		if err != nil {
			fail("footprint", err)
		} else {
			res.Footprint = f
			logf("footprint: podsapi-server %d MiB, %d packages, idle VmRSS %.1f MiB, VmHWM %.1f MiB (RssFile %.1f MiB)",
				f.BinaryBytes>>20, f.Packages, float64(f.RSSBytes)/(1<<20), float64(f.HWMBytes)/(1<<20), float64(f.RSSFileBytes)/(1<<20))
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
	writeSummary(stdout, res, o)
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
