package e2enode_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/client"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/test/childproc"
	"github.com/podsapi/podsapi/test/e2enode"
)

// benchNRIEnv names the Markdown file TestNRIWindow writes (make
// bench-nri: test/bench/nri-window.md); without it the test is
// skipped.
const benchNRIEnv = "PODSAPI_BENCH_NRI"

// benchNRIPodsEnv sizes TestNRIWindow: the pods of each of its two phases
// (default 50; at most 54, since the pods of both phases stay on the node
// and a kubelet runs at most 110).
const benchNRIPodsEnv = "PODSAPI_BENCH_NRI_PODS"

// benchNRIProfileEnv names a directory where TestNRIWindow, when it is
// set, records a CPU profile of each server over the cost phase with
// Linux's perf (`perf record -g`, at 999 Hz), one file a server
// (S.perf.data, S the server's index in the table), to read with `perf
// report -i FILE --no-children`. Off by default: perf perturbs what the
// phase measures.
const benchNRIProfileEnv = "PODSAPI_BENCH_NRI_PROFILE"

// Pacing and bounds of TestNRIWindow.
const (
	// nriPodRate is the pods created a second: a node's pace when a
	// deployment scales up.
	nriPodRate = 2
	// findFast is the interval of the FindPods of a container in the
	// first findFastFor after the test learns of it, findSlow after.
	findFast    = 2 * time.Millisecond
	findFastFor = 100 * time.Millisecond
	findSlow    = 10 * time.Millisecond
	// findBound is how long a container is looked for.
	findBound = 90 * time.Second
)

// windowServer is one podsapi-server of TestNRIWindow.
type windowServer struct {
	name   string
	source string
	nri    bool

	socket  string
	metrics string
	pid     int
	c       *client.Client
}

// TestNRIWindow measures, in one run on one real node (a kube-apiserver
// and etcd, a kubelet v1.37.2 registered with it, on fakecri serving NRI's
// runtime side as containerd does), how long after the runtime created a
// container FindPods finds it by its ID on four podsapi-servers: through
// the kubelet's Pods API (kubelet-grpc) and the API server, each without
// and with --nri-socket. Pods are created through the API server at
// nriPodRate; fakecri records when it created each container. A second
// phase, with no FindPods while the pods start, measures the CPU and
// memory of each server. It writes Markdown to $PODSAPI_BENCH_NRI.
func TestNRIWindow(t *testing.T) {
	out := os.Getenv(benchNRIEnv)
	if out == "" {
		t.Skipf("%s is not set: make bench-nri runs this measurement", benchNRIEnv)
	}
	if err := nodeEnabled(); err != nil {
		t.Skip(err)
	}
	pods := 50
	if v := os.Getenv(benchNRIPodsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 54 {
			t.Fatalf("%s=%q: want 1 to 54", benchNRIPodsEnv, v)
		}
		pods = n
	}
	// A short directory: the sockets live in it.
	dir, err := os.MkdirTemp("", "nw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	nriSocket, events := filepath.Join(dir, "nri.sock"), filepath.Join(dir, "created.jsonl")
	n := e2enode.Start(t, e2enode.WithFakeCRIArgs("--nri-socket", nriSocket, "--events-file", events))

	bin := filepath.Join(t.TempDir(), "podsapi-server")
	buildServer(t, bin)
	servers := []*windowServer{
		{name: "kubelet-grpc", source: "kubelet-grpc"},
		{name: "kubelet-grpc + NRI", source: "kubelet-grpc", nri: true},
		{name: "apiserver", source: "apiserver"},
		{name: "apiserver + NRI", source: "apiserver", nri: true},
	}
	for i, s := range servers {
		s.socket = filepath.Join(dir, fmt.Sprintf("p%d.sock", i))
		s.metrics = freeAddress(t)
		args := []string{"--source", s.source, "--socket", s.socket, "--node-name", e2enode.NodeName,
			"--metrics-address", s.metrics, "--qps", "-1", "--per-client-qps", "-1"}
		switch s.source {
		case "kubelet-grpc":
			args = append(args, "--source-socket", n.Kubelet.Socket)
		case "apiserver":
			args = append(args, "--kubeconfig", n.Kubeconfig)
		}
		if s.nri {
			args = append(args, "--nri-socket", nriSocket)
		}
		s.pid = runServer(t, bin, filepath.Join(dir, fmt.Sprintf("p%d.log", i)), args...)
		c, err := client.New(s.socket)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		s.c = c
	}
	for _, s := range servers {
		waitServing(t, s)
	}

	tail := tailCreated(t, events)
	start := time.Now()
	window := measureWindow(t, n, servers, tail, pods)
	cost := measureCost(t, n, servers, tail, pods)
	took := time.Since(start)

	md := windowMarkdown(servers, window, cost, pods, took)
	if err := os.WriteFile(out, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s:\n%s", out, md)
}

// waitServing waits until s answers FindPods (NOT_FOUND for a container
// that does not exist) and, with NRI, has taken the runtime's
// synchronisation.
func waitServing(t *testing.T, s *windowServer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		_, _, err := s.c.FindPods(ctx, client.ByContainerID("no-such-container-id"))
		if errors.Is(err, client.ErrNotFound) {
			if !s.nri {
				return
			}
			if err = nriConnected(ctx, s.metrics); err == nil {
				return
			}
		}
		last = err
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not serving within a minute: %v", s.name, last)
		case <-tick.C:
		}
	}
}

// nriConnected returns nil when the server's metrics say it is connected
// to the runtime's NRI.
func nriConnected(ctx context.Context, addr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return err
	}
	if !bytes.Contains(b, []byte("\npodsapi_nri_connected 1\n")) {
		return errors.New("not connected to NRI")
	}
	return nil
}

// created is a line of fakecri's --events-file.
type created struct {
	ContainerID     string `json:"container_id"`
	PodUID          string `json:"pod_uid"`
	Name            string `json:"name"`
	CreatedUnixNano int64  `json:"created_unix_nano"`
}

// tailCreated follows fakecri's events file until the end of the test,
// sending each container created.
func tailCreated(t *testing.T, path string) <-chan created {
	ch := make(chan created, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		var (
			f    *os.File
			rest []byte
			buf  = make([]byte, 64<<10)
		)
		defer func() {
			if f != nil {
				f.Close()
			}
		}()
		for {
			if f == nil {
				f, _ = os.Open(path)
			}
			for f != nil {
				k, err := f.Read(buf)
				rest = append(rest, buf[:k]...)
				for {
					i := bytes.IndexByte(rest, '\n')
					if i < 0 {
						break
					}
					var c created
					if json.Unmarshal(rest[:i], &c) == nil {
						select {
						case ch <- c:
						case <-ctx.Done():
							return
						}
					}
					rest = rest[i+1:]
				}
				if err != nil || k == 0 {
					break
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return ch
}

// found is when a server first found a container.
type found struct {
	// after is the time from the container's creation to the answer.
	after time.Duration
	// runtimeOnly says the first match came from the runtime alone: the
	// pod source did not know the pod yet.
	runtimeOnly bool
	// unreported says the pod source had not reported the container
	// yet: the match came from the runtime's facts (the pod's status
	// did not list the container's ID, or the pod was the runtime's
	// alone).
	unreported bool
	ok         bool
}

// windowResult is what phase one measured: for each server (by index),
// what it found of each container.
type windowResult struct {
	containers int
	found      [][]found
	// read is, for each container, the time from its creation to the
	// test's reading of fakecri's record of it: the earliest a FindPods
	// could be sent.
	read []time.Duration
}

// measureWindow creates pods at nriPodRate and, as soon as fakecri has
// created a container, calls FindPods by its ID on every server until it
// is found.
func measureWindow(t *testing.T, n *e2enode.Node, servers []*windowServer, tail <-chan created, pods int) windowResult {
	t.Helper()
	r := windowResult{found: make([][]found, len(servers))}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	wg.Go(func() { createPods(t, n, "w", pods) })
	for c := range containersOf(t, tail, pods) {
		r.containers++
		r.read = append(r.read, time.Since(time.Unix(0, c.CreatedUnixNano)))
		for i, s := range servers {
			wg.Go(func() {
				f := findFirst(t.Context(), s.c, c)
				mu.Lock()
				r.found[i] = append(r.found[i], f)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	return r
}

// findFirst calls FindPods by the container's ID until it finds it, at
// findFast then findSlow, within findBound.
func findFirst(ctx context.Context, c *client.Client, cr created) found {
	at := time.Unix(0, cr.CreatedUnixNano)
	learned := time.Now()
	ctx, cancel := context.WithTimeout(ctx, findBound)
	defer cancel()
	for {
		ms, _, err := c.FindPods(ctx, client.ByContainerID(cr.ContainerID))
		now := time.Now()
		if err == nil && len(ms) > 0 {
			runtimeOnly := ms[0].Source == podsv1alpha1.MatchSource_MATCH_SOURCE_RUNTIME
			return found{after: now.Sub(at), runtimeOnly: runtimeOnly, unreported: runtimeOnly || !lists(ms[0].Pod, cr.ContainerID), ok: true}
		}
		wait := findSlow
		if now.Sub(learned) < findFastFor {
			wait = findFast
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return found{}
		case <-t.C:
		}
	}
}

// lists reports whether the pod's status lists the container id.
func lists(p *corev1.Pod, id string) bool {
	for _, sts := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses, p.Status.EphemeralContainerStatuses} {
		for _, cs := range sts {
			_, got, ok := strings.Cut(cs.ContainerID, "://")
			if !ok {
				got = cs.ContainerID
			}
			if got == id {
				return true
			}
		}
	}
	return false
}

// createPods creates pods pods named <prefix>-NNN bound to the node, at
// nriPodRate.
func createPods(t *testing.T, n *e2enode.Node, prefix string, pods int) {
	tick := time.NewTicker(time.Second / nriPodRate)
	defer tick.Stop()
	zero := int64(0)
	no := false
	for i := range pods {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%03d", prefix, i), Namespace: "default", Labels: map[string]string{"app": "nri-window"}},
			Spec: corev1.PodSpec{
				NodeName:                      e2enode.NodeName,
				AutomountServiceAccountToken:  &no,
				TerminationGracePeriodSeconds: &zero,
				Containers:                    []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
			},
		}
		if _, err := n.ControlPlane.Admin.CoreV1().Pods("default").Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Errorf("create pod %s: %v", p.Name, err)
			return
		}
		if i < pods-1 {
			<-tick.C
		}
	}
}

// containersOf returns the next want containers fakecri creates (the node
// runs only the pods of the phase, whose containers never restart), each
// within two minutes of the one before.
func containersOf(t *testing.T, tail <-chan created, want int) <-chan created {
	ch := make(chan created)
	go func() {
		defer close(ch)
		timeout := time.NewTimer(2 * time.Minute)
		defer timeout.Stop()
		for seen := 0; seen < want; seen++ {
			select {
			case c := <-tail:
				ch <- c
				timeout.Reset(2 * time.Minute)
			case <-timeout.C:
				t.Errorf("fakecri created %d of %d containers within two minutes", seen, want)
				return
			}
		}
	}()
	return ch
}

// costResult is what phase two measured of each server (by index).
type costResult struct {
	containers int
	cpu        []time.Duration
	// switches are the context switches of the server's threads.
	switches []int64
	rss      []int64 // bytes, at the end
}

// measureCost creates pods at nriPodRate with no FindPods while they
// start, waits until every server finds every container from its pod
// source, and takes the CPU time each server used meanwhile and its RSS.
func measureCost(t *testing.T, n *e2enode.Node, servers []*windowServer, tail <-chan created, pods int) costResult {
	t.Helper()
	r := costResult{cpu: make([]time.Duration, len(servers)), switches: make([]int64, len(servers)), rss: make([]int64, len(servers))}
	before := make([]time.Duration, len(servers))
	switchesBefore := make([]int64, len(servers))
	if dir := os.Getenv(benchNRIProfileEnv); dir != "" {
		stop := profileServers(t, dir, servers)
		defer stop()
	}
	for i, s := range servers {
		before[i] = runTime(t, s.pid)
		switchesBefore[i] = contextSwitches(s.pid)
	}
	var (
		ids []created
		wg  sync.WaitGroup
	)
	wg.Go(func() { createPods(t, n, "c", pods) })
	for c := range containersOf(t, tail, pods) {
		ids = append(ids, c)
	}
	wg.Wait()
	r.containers = len(ids)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for _, s := range servers {
		for _, c := range ids {
			for {
				ms, _, err := s.c.FindPods(ctx, client.ByContainerID(c.ContainerID))
				if err == nil && len(ms) > 0 && ms[0].Source == podsv1alpha1.MatchSource_MATCH_SOURCE_POD_SOURCE {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatalf("%s: the pod source did not report container %s within 3 minutes", s.name, c.ContainerID)
				case <-tick.C:
				}
			}
		}
	}
	for i, s := range servers {
		r.cpu[i] = runTime(t, s.pid) - before[i]
		r.switches[i] = contextSwitches(s.pid) - switchesBefore[i]
		r.rss[i] = vmRSS(t, s.pid)
	}
	return r
}

// profileServers starts `perf record` on each server, writing to dir, and
// returns the function that stops them and waits for their files.
func profileServers(t *testing.T, dir string, servers []*windowServer) (stop func()) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var cmds []*exec.Cmd
	for i, s := range servers {
		cmd := exec.Command("perf", "record", "-q", "-F", "999", "-g", "-p", strconv.Itoa(s.pid),
			"-o", filepath.Join(dir, fmt.Sprintf("%d.perf.data", i)))
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatalf("%s: %v", benchNRIProfileEnv, err)
		}
		cmds = append(cmds, cmd)
	}
	return func() {
		for i, cmd := range cmds {
			_ = cmd.Process.Signal(syscall.SIGINT)
			if err := cmd.Wait(); err != nil {
				t.Logf("perf record of %s: %v", servers[i].name, err)
			}
		}
		t.Logf("CPU profiles of the cost phase in %s (0-%d.perf.data, in the table's order)", dir, len(cmds)-1)
	}
}

// runTime is the time the threads of pid ran on a CPU.
func runTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	d, err := childproc.RunTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// contextSwitches is the number of context switches, voluntary and not,
// of the threads of pid (those of threads that exited are not counted).
func contextSwitches(pid int) int64 {
	n, _ := childproc.ContextSwitches(pid)
	return n
}

// vmRSS is the resident set of pid, in bytes.
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	n, err := childproc.RSS(pid)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// windowMarkdown is the report of TestNRIWindow.
func windowMarkdown(servers []*windowServer, w windowResult, c costResult, pods int, took time.Duration) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "## The window NRI closes, side by side (issue 34)\n\n")
	fmt.Fprintf(&sb, "Written by `make bench-nri` (test/e2enode TestNRIWindow) on %s, in %s; shared 2-core machine: read the\n", time.Now().UTC().Format("2006-01-02"), took.Round(time.Second))
	fmt.Fprintf(&sb, "ratios. One real node: kube-apiserver and etcd, a kubelet v1.37.2 registered with them on fakecri (upstream's fake CRI)\n")
	fmt.Fprintf(&sb, "serving NRI's runtime side (`github.com/containerd/nri/pkg/adaptation` v0.12.5, called where containerd's CRI plugin calls\n")
	fmt.Fprintf(&sb, "it), and four podsapi-servers at once: the kubelet's Pods API (`kubelet-grpc`) and the API server (`apiserver`) as pod\n")
	fmt.Fprintf(&sb, "source, each without and with `--nri-socket` on the fake runtime's NRI socket. %d pods (one container each) are created\n", pods)
	fmt.Fprintf(&sb, "through the API server, bound to the node, %d a second; fakecri records when it created each container, and as soon as the\n", nriPodRate)
	fmt.Fprintf(&sb, "test reads that record it calls FindPods by the container's ID on every server, through the Go client, every %s for\n", findFast)
	fmt.Fprintf(&sb, "%s then every %s, until found. The time is from the container's creation to the answer that found it.\n", findFastFor, findSlow)
	slices.Sort(w.read)
	fmt.Fprintf(&sb, "The floor, the time from a container's creation to the test's reading of fakecri's record of it (the earliest a FindPods\n")
	fmt.Fprintf(&sb, "could be sent): median %s, p90 %s, max %s. \"Before the pod source\" counts the containers whose first match came from the\n", dur(quantile(w.read, 50)), dur(quantile(w.read, 90)), dur(quantile(w.read, 100)))
	fmt.Fprintf(&sb, "runtime's facts: the pod's status from the pod source did not list the container's ID yet (of them, \"pod unknown\"\n")
	fmt.Fprintf(&sb, "counts those whose pod the pod source did not report at all: `PodMatch.source` = `MATCH_SOURCE_RUNTIME`).\n\n")
	fmt.Fprintf(&sb, "| podsapi-server | found | median | p90 | max | found before the pod source reported the container | of them, pod unknown |\n|---|---|---|---|---|---|---|\n")
	var medians []time.Duration
	for i, s := range servers {
		var ds []time.Duration
		early, unknown := 0, 0
		for _, f := range w.found[i] {
			if f.ok {
				ds = append(ds, f.after)
				if f.unreported {
					early++
				}
				if f.runtimeOnly {
					unknown++
				}
			}
		}
		slices.Sort(ds)
		med, p90, max := quantile(ds, 50), quantile(ds, 90), quantile(ds, 100)
		medians = append(medians, med)
		fmt.Fprintf(&sb, "| %s | %d of %d | %s | %s | %s | %d | %d |\n", s.name, len(ds), w.containers, dur(med), dur(p90), dur(max), early, unknown)
	}
	fmt.Fprintf(&sb, "\nWith NRI the median is %s of the median without it through the kubelet's Pods API, and %s through the API server.\n",
		ratio(medians[1], medians[0]), ratio(medians[3], medians[2]))
	fmt.Fprintf(&sb, "fakecri creates and starts a container at once, so the pod source's delay here is a floor: with a real runtime the\n")
	fmt.Fprintf(&sb, "kubelet reports a container's ID after the runtime has also started it (the kubelet's sync that creates a container starts\n")
	fmt.Fprintf(&sb, "it too, and the status follows), while NRI's post-create event comes before the start.\n\n")
	fmt.Fprintf(&sb, "The cost, measured in a second phase of %d pods created at the same rate with no FindPods while they start (then one\n", pods)
	fmt.Fprintf(&sb, "FindPods a container, until each server finds it from its pod source): the CPU time of each server's process over the\n")
	fmt.Fprintf(&sb, "phase (`/proc/PID/task/*/schedstat`), per 1,000 containers, and its resident set at the end (`VmRSS`). The servers\n")
	fmt.Fprintf(&sb, "with NRI take every sandbox and container event of the runtime (run, create, start) besides their pod source; each\n")
	fmt.Fprintf(&sb, "server's idle work over the phase is in its CPU time, alike with and without NRI. The context switches are those of the\n")
	fmt.Fprintf(&sb, "server's threads over the phase (`/proc/PID/task/*/status`), per container: each time the process wakes for an event.\n\n")
	fmt.Fprintf(&sb, "| podsapi-server | CPU per 1,000 containers | ratio to the same source without NRI | added by NRI per 1,000 containers | context switches per container | RSS at the end |\n|---|---|---|---|---|---|\n")
	for i, s := range servers {
		per := time.Duration(0)
		if c.containers > 0 {
			per = c.cpu[i] * 1000 / time.Duration(c.containers)
		}
		r, added := "", ""
		if s.nri && c.containers > 0 {
			r = ratio(c.cpu[i], c.cpu[i-1])
			added = ((c.cpu[i] - c.cpu[i-1]) * 1000 / time.Duration(c.containers)).Round(time.Millisecond).String()
		}
		sw := 0.0
		if c.containers > 0 {
			sw = float64(c.switches[i]) / float64(c.containers)
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %.0f | %.1f MiB |\n", s.name, per.Round(time.Millisecond), r, added, sw, float64(c.rss[i])/(1<<20))
	}
	fmt.Fprintf(&sb, "\nWhere the added CPU went when profiled (2026-12-02, a `perf` profile of each server over this phase: `PODSAPI_BENCH_NRI_PROFILE=DIR\n")
	fmt.Fprintf(&sb, "make bench-nri`, then `perf report -i DIR/1.perf.data --no-children`): not into podsapi's handling of the facts, but into NRI's transport\n")
	fmt.Fprintf(&sb, "(ttrpc over NRI's multiplexed connection: the socket's reads and writes, a goroutine and a protobuf decoding of the whole\n")
	fmt.Fprintf(&sb, "pod sandbox and container per event) and into Go's scheduler waking the idle process's threads for each of the three\n")
	fmt.Fprintf(&sb, "events of a container (`runtime.sysmon`, `runtime.findRunnable`), which the micro-benchmark of the previous section,\n")
	fmt.Fprintf(&sb, "sending its events back to back, does not pay unless they are paced (its `events paced` case).\n")
	return sb.String()
}

// quantile is the q-th percentile of sorted ds (0 when empty).
func quantile(ds []time.Duration, q int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := (len(ds)*q + 99) / 100
	return ds[max(0, min(len(ds)-1, i-1))]
}

func dur(d time.Duration) string {
	switch {
	case d == 0:
		return "–"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

func ratio(a, b time.Duration) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.3gx", float64(a)/float64(b))
}
