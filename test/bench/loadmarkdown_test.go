package bench

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// loadMarkdown writes the control plane's load: the one-node table for the
// agent counts, and the fleet's (fleet[0] its baseline), with their ratios.
// It takes each baseline's figures off the scenarios measured against it.
func loadMarkdown(counts []int, results, fleet []cpResult) string {
	base := results[0]
	subtract(results[1:], base)
	var sb strings.Builder
	fmt.Fprintf(&sb, `## The control plane's load: agents direct, through podsapi, or through its front door (issues 21 and 32)

A real kube-apiserver v1.37.2 on etcd 3.7.0 (loopback, no other client) holds %d pods of one node and %d of
19 others. N agents follow the node's pods in one of three ways: each with its own client-go informer on the
API server (field selector spec.nodeName, WatchList, protobuf, its own connection: **direct**); each with a
WatchPods stream of one podsapi (--source=apiserver, one informer-equivalent reflector: **podsapi**); or each
with the **same informer code** pointed at podsapi's Kubernetes API instead of the API server (**front door**:
kubeapi.Handler fed by the API-server source, one reflector on the API server, behind the door of kubeapi/door,
which authenticates each informer's token with a TokenReview and authorizes it with a SubjectAccessReview,
both cached, served over loopback TLS with HTTP/2 by a child process of its own). From the agents' start to the last agent's receipt of the last of %d status updates
written at %d/s (the same churn in each), measured at the API server: its pod watches open at the end
(apiserver_longrunning_requests), the LIST and WATCH requests of pods (apiserver_request_total), the bytes of
pod LIST answers and watch events it sent (apiserver_response_sizes, apiserver_watch_events_sizes), its CPU
(/proc, utime+stime), and the delay from the start of each status update to its event at each agent. The first
four are above a baseline measured in the same run with the same churn and no agent (first row: the writer's
%d updates and the API server's own watch of every pod), so that they are what the agents cost; the API
server's CPU moves by about 0.1 s from run to run, so a CPU figure below that is noise. Ratios are against
direct in the same run. Written by `+"`make bench-apiserver`"+` (test/bench/controlplane_test.go)
into test/bench/apiserver.md, which docs/benchmarks.md embeds.

| agents | feed | pod watches | LIST+WATCH requests | bytes sent | API server CPU | event delay p50 | p99 | events |
|---:|---|---:|---:|---:|---:|---:|---:|---:|
`, loadNodePods, loadOtherPods, loadUpdates, loadUpdateRate, loadUpdates)
	fmt.Fprintf(&sb, "| 0 | baseline (no agent; not subtracted) | %.0f | %.0f | %s | %.2f s | | | |\n", base.watchers, base.requests, fmtBytes(base.bytes), base.cpu)
	byKey := make(map[string]cpResult)
	for _, r := range results[1:] {
		byKey[fmt.Sprintf("%s-%d", r.feed, r.agents)] = r
		fmt.Fprintf(&sb, "| %d | %s | %.0f | %.0f | %s | %.2f s | %s | %s | %d |\n", r.agents, r.feed, r.watchers, r.requests,
			fmtBytes(r.bytes), r.cpu, r.p50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond), r.events)
	}
	sb.WriteString("\n| agents | feed ÷ direct | watches ÷ | requests ÷ | bytes ÷ | API server CPU ÷ | p50 ÷ | p99 ÷ |\n|---:|---|---:|---:|---:|---:|---:|---:|\n")
	for _, n := range counts {
		d := byKey[fmt.Sprintf("%s-%d", feedDirect, n)]
		for _, feed := range []string{feedPodsAPI, feedFrontDoor} {
			p := byKey[fmt.Sprintf("%s-%d", feed, n)]
			fmt.Fprintf(&sb, "| %d | %s | %s | %s | %s | %s | %s | %s |\n", n, feed, div(p.watchers, d.watchers), div(p.requests, d.requests),
				div(p.bytes, d.bytes), cpuDiv(p.cpu, d.cpu), div(float64(p.p50), float64(d.p50)), div(float64(p.p99), float64(d.p99)))
		}
	}

	fmt.Fprintf(&sb, `
**The same work, the API server's CPU against the front door's.** The API server's CPU from the direct
informers' start to their sync (their N lists: a WatchList each, the initial events and the bookmark), divided by
N, against the front door's own CPU (from /proc of its process, which runs no informer) over the same phase of
the front-door run, divided by N; and the API server's CPU during the churn above the baseline's, divided by
the events the direct informers received, against the front door's CPU during the churn divided by the events
its informers received (which includes the front door's own reflector receiving the %d updates from the API
server). CPU is read in ticks of 10 ms, so the per-list figures of small N are coarse.

| agents | per list: API server (direct) | front door | ÷ | per event: API server (direct) | front door | ÷ |
|---:|---:|---:|---:|---:|---:|---:|
`, loadUpdates)
	for _, n := range counts {
		d, f := byKey[fmt.Sprintf("%s-%d", feedDirect, n)], byKey[fmt.Sprintf("%s-%d", feedFrontDoor, n)]
		dl, fl := perUnit(d.syncCPU, d.agents), perUnit(f.doorSyncCPU, f.agents)
		de, fe := perUnit(d.churnCPU-base.churnCPU, d.events), perUnit(f.doorChurnCPU, f.events)
		fmt.Fprintf(&sb, "| %d | %s | %s | %s | %s | %s | %s |\n", n, fmtCPU(dl), fmtCPU(fl), cpuDiv(fl, dl), fmtCPU(de), fmtCPU(fe), cpuDiv(fe, de))
	}
	if len(fleet) > 0 {
		fleetMarkdown(&sb, fleet)
	}
	return sb.String()
}

// fleetMarkdown writes the fleet's table and ratios.
func fleetMarkdown(sb *strings.Builder, fleet []cpResult) {
	base := fleet[0]
	subtract(fleet[1:], base)
	fmt.Fprintf(sb, `
### The fleet: K nodes of M informers, direct or through a front door per node

As kubemark simulates nodes, on this machine: %d nodes with %d pods each (%d pods), %d status updates at %d/s
over all of them in turn. Some of the nodes (K) each run M informers (the same informer code as above, field
selector spec.nodeName of their node), either on the API server (**direct**: K×M pod watches) or on a front door
of their node's own (**front door**: K child processes, each a podsapi with its own API-server source and
Kubernetes API, and its M informers). Each row runs on a control plane of its own, started and seeded the
same way, so that the API server's memory at the end of the churn (its resident memory, VmRSS from /proc, and its live
Go heap, go_gc_heap_live_bytes: what its last garbage collection marked) is the row's own; the other figures
are above the baseline row's (no agent, same churn), and the memory is given with its difference from the
baseline's in parentheses (a fresh API server's RSS moves by about 10 MiB from start to start, so an RSS
difference below that is noise). The API server's CPU is of the whole row, and of its first phase alone, from
the agents' start to their sync (their lists; in the front-door rows the front doors' own start and lists). The front doors' CPU and RSS are all K processes together.

| nodes K | informers per node M | informers | feed | pod watches | LIST+WATCH requests | bytes sent | API server CPU | of which lists | API server RSS | API server live heap | front doors' CPU | front doors' RSS | event delay p50 | p99 | events |
|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
`, base.nodes, *fleetPods, base.nodes*max(*fleetPods, 1), *fleetUpdates, loadUpdateRate)
	fmt.Fprintf(sb, "| 0 | 0 | 0 | baseline (no agent; not subtracted) | %.0f | %.0f | %s | %.2f s | | %s | %s | | | | | |\n",
		base.watchers, base.requests, fmtBytes(base.bytes), base.cpu, fmtBytes(base.rss), fmtBytes(base.heap))
	type shape struct{ k, m int }
	byKey := make(map[string]cpResult)
	var shapes []shape
	for _, r := range fleet[1:] {
		s := shape{r.nodes, r.agents / max(r.nodes, 1)}
		byKey[fmt.Sprintf("%s-%d-%d", r.feed, s.k, s.m)] = r
		if r.feed == feedDirect {
			shapes = append(shapes, s)
		}
		doorCPU, doorRSS := "", ""
		if r.feed == feedFrontDoor {
			doorCPU, doorRSS = fmt.Sprintf("%.2f s", r.doorSyncCPU+r.doorChurnCPU), fmtBytes(r.doorRSS)
		}
		fmt.Fprintf(sb, "| %d | %d | %d | %s | %.0f | %.0f | %s | %.2f s | %.2f s | %s (%s) | %s (%s) | %s | %s | %s | %s | %d |\n", s.k, s.m, r.agents, r.feed,
			r.watchers, r.requests, fmtBytes(r.bytes), r.cpu, r.syncCPU, fmtBytes(r.rss+base.rss), signedBytes(r.rss),
			fmtBytes(r.heap+base.heap), signedBytes(r.heap), doorCPU, doorRSS,
			r.p50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond), r.events)
	}
	sb.WriteString("\nFront door ÷ direct, the same K and M:\n\n| K×M | watches ÷ | requests ÷ | bytes ÷ | API server CPU ÷ | of lists ÷ | RSS over baseline ÷ | live heap over baseline ÷ |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range shapes {
		d, f := byKey[fmt.Sprintf("%s-%d-%d", feedDirect, s.k, s.m)], byKey[fmt.Sprintf("%s-%d-%d", feedFrontDoor, s.k, s.m)]
		fmt.Fprintf(sb, "| %d×%d | %s | %s | %s | %s | %s | %s | %s |\n", s.k, s.m, div(f.watchers, d.watchers), div(f.requests, d.requests),
			div(f.bytes, d.bytes), cpuDiv(f.cpu, d.cpu), cpuDiv(f.syncCPU, d.syncCPU), cpuDiv(f.rss, d.rss), cpuDiv(f.heap, d.heap))
	}
	sb.WriteString("\nHow each feed's cost grows with the nodes (K, the same M) and with the informers per node (M, the same K), " +
		"in the same run: the informers' count grows by the first ratio.\n\n" +
		"| from → to | informers ÷ | feed | watches ÷ | requests ÷ | bytes ÷ | API server CPU ÷ | of lists ÷ | RSS over baseline ÷ | live heap over baseline ÷ |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for i, from := range shapes {
		for _, to := range shapes[i+1:] {
			if from.k != to.k && from.m != to.m {
				continue
			}
			for _, feed := range []string{feedDirect, feedFrontDoor} {
				a, b := byKey[fmt.Sprintf("%s-%d-%d", feed, from.k, from.m)], byKey[fmt.Sprintf("%s-%d-%d", feed, to.k, to.m)]
				fmt.Fprintf(sb, "| %d×%d → %d×%d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", from.k, from.m, to.k, to.m,
					div(float64(b.agents), float64(a.agents)), feed, div(b.watchers, a.watchers), div(b.requests, a.requests),
					div(b.bytes, a.bytes), cpuDiv(b.cpu, a.cpu), cpuDiv(b.syncCPU, a.syncCPU), cpuDiv(b.rss, a.rss), cpuDiv(b.heap, a.heap))
			}
		}
	}
}

// subtract takes base's figures off each of results; RSS becomes the
// difference from base's.
func subtract(results []cpResult, base cpResult) {
	for i := range results {
		r := &results[i]
		r.watchers -= base.watchers
		r.requests -= base.requests
		r.bytes -= base.bytes
		r.cpu -= base.cpu
		r.rss -= base.rss
		r.heap -= base.heap
	}
}

func div(a, b float64) string {
	if b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// cpuDiv is div for figures that may be within noise (zero or below).
func cpuDiv(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "within noise"
	}
	return div(a, b)
}

// perUnit returns seconds per unit, or 0 without units.
func perUnit(seconds float64, units int) float64 {
	if units == 0 {
		return 0
	}
	return seconds / float64(units)
}

// fmtCPU writes a CPU time per unit.
func fmtCPU(seconds float64) string {
	if seconds <= 0 {
		return "within noise"
	}
	return time.Duration(seconds * float64(time.Second)).Round(100 * time.Nanosecond).String()
}

// signedBytes writes a difference of bytes with its sign.
func signedBytes(b float64) string {
	if b < 0 {
		return "−" + fmtBytes(-b)
	}
	return "+" + fmtBytes(b)
}

// TestLoadMarkdown checks the writer's arithmetic on figures made up for it:
// baselines taken off, ratios of the same run, growth between shapes.
func TestLoadMarkdown(t *testing.T) {
	one := []cpResult{
		{feed: feedNone, bytes: 100, cpu: 1},
		{feed: feedDirect, agents: 10, watchers: 10, requests: 10, bytes: 1100, cpu: 2, syncCPU: 0.05, churnCPU: 1.5, events: 1000},
		{feed: feedPodsAPI, agents: 10, watchers: 1, requests: 1, bytes: 200, cpu: 1.1, events: 1000},
		{feed: feedFrontDoor, agents: 10, watchers: 1, requests: 1, bytes: 200, cpu: 1.1, doorSyncCPU: 0.02, doorChurnCPU: 0.1, events: 1000},
	}
	fleet := []cpResult{
		{feed: feedNone, nodes: 4, rss: 100 << 20, heap: 50 << 20, cpu: 1},
		{feed: feedDirect, nodes: 4, agents: 8, watchers: 8, requests: 8, bytes: 800, cpu: 1.8, rss: 108 << 20, heap: 58 << 20},
		{feed: feedFrontDoor, nodes: 4, agents: 8, watchers: 4, requests: 4, bytes: 400, cpu: 1.4, rss: 104 << 20, heap: 54 << 20},
		{feed: feedDirect, nodes: 4, agents: 16, watchers: 16, requests: 16, bytes: 1600, cpu: 2.6, rss: 116 << 20, heap: 66 << 20},
		{feed: feedFrontDoor, nodes: 4, agents: 16, watchers: 4, requests: 4, bytes: 400, cpu: 1.4, rss: 104 << 20, heap: 54 << 20},
	}
	got := loadMarkdown([]int{10}, one, fleet)
	for _, want := range []string{
		"| 10 | front door | 0.10 | 0.10 | 0.10 | 0.10 | — | — |", // 1 of 10 watches; 0.1 s of 1 s CPU over the baseline.
		"| 10 | 5ms | 2ms | 0.40 | 1.5ms | 100µs | 0.07 |",        // 1.5 s of churn CPU (the baseline's is 0) for 1000 events.
		"| 4 | 2 | 8 | direct | 8 | 8 | 800 B | 0.80 s | 0.00 s | 108.0 MiB (+8.0 MiB) | 58.0 MiB (+8.0 MiB) |",
		"| 4×2 | 0.50 | 0.50 | 0.50 | 0.50 | within noise | 0.50 | 0.50 |", // Front door ÷ direct.
		"| 4×2 → 4×4 | 2.00 | direct | 2.00 | 2.00 | 2.00 | 2.00 | within noise | 2.00 | 2.00 |",
		"| 4×2 → 4×4 | 2.00 | front door | 1.00 | 1.00 | 1.00 | 1.00 | within noise | 1.00 | 1.00 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the markdown lacks %q:\n%s", want, got)
		}
	}
}
