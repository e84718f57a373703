package realkubelet_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/kubelet/pkg/apis/pods/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1/v1alpha1connect"
	"github.com/podsapi/podsapi/internal/h2c"
	"github.com/podsapi/podsapi/test/childproc"
	"github.com/podsapi/podsapi/test/podstest"
	"github.com/podsapi/podsapi/test/realkubelet"
)

// SideBySideEnv names the file TestSideBySide writes its Markdown section
// to (make bench-kubelet: test/bench/kubelet.md, which make bench puts
// in docs/benchmarks.md); unset, the test is skipped.
const SideBySideEnv = "PODSAPI_BENCH_KUBELET"

// TestSideBySide measures a real kubelet's Pods API and podsapi-server fed
// by it (--source kubelet-grpc), on the same static pods, through the same
// client and wire (the kubelet's v1alpha1.Pods, which podsapi serves too):
// paced ListPods, GetPod and masked ListPods, 100 watchers at once, and the
// server CPU per call of each process (its run time in
// /proc/PID/task/*/schedstat, less its idle run time over as long).
func TestSideBySide(t *testing.T) {
	out := os.Getenv(SideBySideEnv)
	if out == "" {
		t.Skipf("%s is not set: make bench-kubelet measures", SideBySideEnv)
	}
	var sections []string
	for _, n := range []int{110} {
		sections = append(sections, measure(t, n))
	}
	md := "## Side by side with a real kubelet (issue 26)\n\n" +
		"Written by `make bench-kubelet` (`test/realkubelet` TestSideBySide), not by `make bench`, which copies it here: a real\n" +
		"kubelet (k8s.io/kubernetes v1.37.2 `cmd/kubelet`, standalone, upstream's fake CRI, confined as `make conformance-kubelet`\n" +
		"runs it) serves the synthetic pods of make bench as static pods it can run (no token volume, secret or node name: about\n" +
		"2 KB of protobuf each as the kubelet serves them, with its own status), and\n" +
		"podsapi-server reads it with `--source kubelet-grpc`. The same connect-go client on the kubelet's wire calls each socket,\n" +
		"paced at 90 calls/s (under the kubelet's 100 qps limit, which every client shares); CPU per call is the run time of the\n" +
		"server's process during the calls less its idle run time over as long (the kubelet housekeeps every second). The masked\n" +
		"list asks for 5 paths; a kubelet ignores masks and sends every pod whole. Measured " + time.Now().UTC().Format("2006-01-02") + " on a shared 2-core machine:\n" +
		"read the ratios.\n\n" + strings.Join(sections, "\n")
	if err := os.WriteFile(out, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log(md)
}

// measure runs the comparison at n pods and returns its table.
func measure(t *testing.T, n int) string {
	k := start(t, realkubelet.Options{MaxPods: max(realkubelet.DefaultMaxPods, n+10)})
	for i := range n {
		writeManifest(t, k, benchPod(i))
	}
	kc := wireClient(k.Socket)
	waitPods(t, kc, n)
	server := buildServer(t)
	socket := filepath.Join(k.Dir, "podsapi.sock")
	pid := runServerPID(t, server, "--source", "kubelet-grpc", "--source-socket", k.Socket, "--socket", socket,
		"--metrics-address", freeAddress(t), "--log-level", "warn")
	pc := wireClient(socket)
	waitPods(t, pc, n)
	pods := listRaw(t, kc)
	uid := uidOf(t, pods[len(pods)/2])
	mask := http.Header{"X-Kubernetes-Fieldmask": []string{"metadata.name,metadata.namespace,metadata.uid,status.phase,status.podIP"}}
	type target struct {
		name string
		c    v1alpha1connect.PodsClient
		pid  int
	}
	targets := []target{{"kubelet", kc, k.PID()}, {"podsapi", pc, pid}}
	ctx := t.Context()
	const calls = 450 // 5 s at 90/s
	var rows []string
	results := map[string][2]paced{}
	for _, op := range []struct {
		name string
		call func(c v1alpha1connect.PodsClient) error
	}{
		{"ListPods", func(c v1alpha1connect.PodsClient) error {
			_, err := c.ListPods(ctx, connect.NewRequest(&v1alpha1.ListPodsRequest{}))
			return err
		}},
		{"masked ListPods (5 paths)", func(c v1alpha1connect.PodsClient) error {
			req := connect.NewRequest(&v1alpha1.ListPodsRequest{})
			for k, v := range mask {
				req.Header()[k] = v
			}
			_, err := c.ListPods(ctx, req)
			return err
		}},
		{"GetPod", func(c v1alpha1connect.PodsClient) error {
			_, err := c.GetPod(ctx, connect.NewRequest(&v1alpha1.GetPodRequest{PodUID: uid}))
			return err
		}},
	} {
		var pair [2]paced
		for i, tg := range targets {
			pair[i] = pace(t, tg.pid, calls, func() error { return op.call(tg.c) })
		}
		results[op.name] = pair
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s |", op.name, pair[0], pair[1], pair[1].ratio(pair[0])))
	}
	var storm [2]stormResult
	for i, tg := range targets {
		storm[i] = watchStorm(t, socketOf(k, socket, i), tg.pid, 100)
	}
	rows = append(rows, fmt.Sprintf("| 100 watchers at once: sync p99 / CPU per watcher | %s | %s | %.2f / %.2f |", storm[0], storm[1],
		float64(storm[1].p99)/float64(storm[0].p99), float64(storm[1].cpu)/float64(storm[0].cpu)))
	rss := func(pid int) string {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		for l := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				kb, _ := strconv.Atoi(strings.Fields(v)[0])
				return fmt.Sprintf("%.0f MB", float64(kb)/1024)
			}
		}
		return "?"
	}
	rows = append(rows, fmt.Sprintf("| RSS after the runs | %s | %s | |", rss(k.PID()), rss(pid)))
	rows = append(rows, editDelays(t, k, kc, pc, pods))
	return fmt.Sprintf("### %d static pods (%s a list from the kubelet)\n\n| %d pods, paced at 90/s | kubelet p50 / p99 / CPU per call | podsapi over it | ratio |\n|---|---|---|---|\n%s\n",
		n, kb(listBytes(pods)), n, strings.Join(rows, "\n"))
}

func socketOf(k *realkubelet.Kubelet, podsapi string, i int) string {
	if i == 0 {
		return k.Socket
	}
	return podsapi
}

// paced is one target's figures for one call.
type paced struct {
	p50, p99, cpu time.Duration
	errors        int
}

func (p paced) String() string {
	s := fmt.Sprintf("%s / %s / %s", ms(p.p50), ms(p.p99), ms(p.cpu))
	if p.errors > 0 {
		s += fmt.Sprintf(" (%d errors)", p.errors)
	}
	return s
}

func (p paced) ratio(base paced) string {
	return fmt.Sprintf("%.2f / %.2f / %.2f", float64(p.p50)/float64(base.p50), float64(p.p99)/float64(base.p99), float64(p.cpu)/float64(base.cpu))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func kb(n int) string { return fmt.Sprintf("%.0f KB", float64(n)/1000) }

// pace makes n calls at 90/s and returns their latencies and the CPU per
// call of pid, less its idle CPU over as long.
func pace(t *testing.T, pid, n int, call func() error) paced {
	t.Helper()
	for range 5 { // warm up
		_ = call()
	}
	d := time.Duration(n) * time.Second / 90
	idle0 := runTime(t, pid)
	time.Sleep(d) // the idle baseline: as long as the calls take
	idle := runTime(t, pid) - idle0
	tick := time.NewTicker(time.Second / 90)
	defer tick.Stop()
	var lat []time.Duration
	var errs int
	cpu0 := runTime(t, pid)
	for range n {
		<-tick.C
		s := time.Now()
		if err := call(); err != nil {
			errs++
			continue
		}
		lat = append(lat, time.Since(s))
	}
	busy := runTime(t, pid) - cpu0
	slices.Sort(lat)
	p := paced{errors: errs, cpu: max(busy-idle, 0) / time.Duration(n)}
	if len(lat) > 0 {
		p.p50, p.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	return p
}

// stormResult is what watchStorm measured.
type stormResult struct {
	p99, cpu time.Duration // time to sync, CPU per watcher
	errors   int
}

func (r stormResult) String() string {
	s := fmt.Sprintf("%.2f s / %s", r.p99.Seconds(), ms(r.cpu))
	if r.errors > 0 {
		s += fmt.Sprintf(" (%d errors)", r.errors)
	}
	return s
}

// watchStorm starts w watchers at once on socket, one connection each,
// and returns the p99 of their time to INITIAL_SYNC_COMPLETE and the CPU
// per watcher of pid.
func watchStorm(t *testing.T, socket string, pid, w int) stormResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var times []time.Duration
	var errs int
	var wg sync.WaitGroup
	cpu0 := runTime(t, pid)
	start := time.Now()
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := h2c.NewClient(socket)
			defer hc.CloseIdleConnections()
			c := v1alpha1connect.NewPodsClient(hc, h2c.BaseURL, connect.WithGRPC(), connect.WithReadMaxBytes(256<<20))
			sctx, scancel := context.WithCancel(ctx)
			defer scancel()
			s, err := c.WatchPods(sctx, connect.NewRequest(&v1alpha1.WatchPodsRequest{}))
			if err == nil {
				for s.Receive() {
					if s.Msg().GetType() == v1alpha1.EventType_INITIAL_SYNC_COMPLETE {
						mu.Lock()
						times = append(times, time.Since(start))
						mu.Unlock()
						break
					}
				}
				err = s.Err()
				s.Close()
			}
			if err != nil {
				mu.Lock()
				errs++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	busy := runTime(t, pid) - cpu0
	slices.Sort(times)
	r := stormResult{cpu: busy / time.Duration(w), errors: errs}
	if len(times) > 0 {
		r.p99 = times[len(times)*99/100]
	}
	return r
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

// benchPod is the i-th synthetic pod of make bench, made a static pod a
// standalone kubelet can run: without the service account token volume,
// the secret environment variable and the node name.
func benchPod(i int) *corev1.Pod {
	p := podstest.Pod(fmt.Sprintf("ns-%02d", i%10), fmt.Sprintf("pod-%05d-x7k2q", i), i)
	p.Status = corev1.PodStatus{}
	p.Spec.NodeName, p.Spec.ServiceAccountName = "", ""
	p.Spec.Volumes = slices.DeleteFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.Projected != nil })
	for j := range p.Spec.Containers {
		c := &p.Spec.Containers[j]
		c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "kube-api-access" })
		c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.ValueFrom != nil })
	}
	p.OwnerReferences = nil
	return p
}

func writeManifest(t *testing.T, k *realkubelet.Kubelet, p *corev1.Pod) {
	t.Helper()
	p.APIVersion, p.Kind = "v1", "Pod"
	b, err := yaml.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(k.ManifestDir, p.Namespace+"_"+p.Name+".yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func wireClient(socket string) v1alpha1connect.PodsClient {
	return v1alpha1connect.NewPodsClient(h2c.NewClient(socket), h2c.BaseURL, connect.WithGRPC(), connect.WithReadMaxBytes(256<<20))
}

// waitPods waits until c lists n pods.
func waitPods(t *testing.T, c v1alpha1connect.PodsClient, n int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		res, err := c.ListPods(t.Context(), connect.NewRequest(&v1alpha1.ListPodsRequest{}))
		if err == nil && len(res.Msg.GetPods()) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %d pods: %v", n, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func listRaw(t *testing.T, c v1alpha1connect.PodsClient) [][]byte {
	t.Helper()
	res, err := c.ListPods(t.Context(), connect.NewRequest(&v1alpha1.ListPodsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	return res.Msg.GetPods()
}

func listBytes(pods [][]byte) int {
	n := 0
	for _, p := range pods {
		n += len(p)
	}
	return n
}

func uidOf(t *testing.T, raw []byte) string {
	t.Helper()
	var p corev1.Pod
	if err := p.Unmarshal(raw); err != nil {
		t.Fatal(err)
	}
	return string(p.UID)
}

// editDelays edits the annotations of a static pod five times, one edit at
// a time, and returns a row with how long each took to reach a watcher of
// the kubelet and one of podsapi (default resync interval), and the
// ListPods the kubelet served meanwhile (podsapi's resyncs: the tokens of
// its rate limit they cost).
func editDelays(t *testing.T, k *realkubelet.Kubelet, kc, pc v1alpha1connect.PodsClient, pods [][]byte) string {
	t.Helper()
	const edits = 5
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var target corev1.Pod
	if err := target.Unmarshal(pods[0]); err != nil {
		t.Fatal(err)
	}
	// The manifest's own name: the kubelet appends the node name.
	name := strings.TrimSuffix(target.Name, "-"+k.NodeName)
	var base *corev1.Pod
	for i := range len(pods) + 1 {
		if p := benchPod(i); p.Name == name && p.Namespace == target.Namespace {
			base = p
			break
		}
	}
	if base == nil {
		t.Fatalf("no bench pod named %s", name)
	}
	seen := func(c v1alpha1connect.PodsClient) chan string {
		ch := make(chan string, 64)
		s, err := c.WatchPods(ctx, connect.NewRequest(&v1alpha1.WatchPodsRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer s.Close()
			for s.Receive() {
				var p corev1.Pod
				if p.Unmarshal(s.Msg().GetPod()) == nil && p.UID == target.UID {
					select {
					case ch <- p.Annotations["bench.podsapi.io/edit"]:
					default:
					}
				}
			}
		}()
		return ch
	}
	kw, pw := seen(kc), seen(pc)
	lists0 := kubeletLists(t, k)
	start := time.Now()
	var delays []time.Duration
	kubeletSaw := 0
	for i := 1; i <= edits; i++ {
		// At a random point of the resync interval, not right after the
		// resync that found the previous edit.
		time.Sleep(rand.N(10 * time.Second))
		p := base.DeepCopy()
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations["bench.podsapi.io/edit"] = strconv.Itoa(i)
		writeManifest(t, k, p)
		edited := time.Now()
		want := strconv.Itoa(i)
		deadline := time.After(time.Minute)
	wait:
		for {
			select {
			case v := <-pw:
				if v == want {
					delays = append(delays, time.Since(edited))
					break wait
				}
			case v := <-kw:
				if v == want {
					kubeletSaw++
				}
			case <-deadline:
				t.Fatalf("edit %d: not on podsapi's watch within a minute", i)
			}
		}
	}
	// The kubelet's watch gets a last chance.
	drain := time.After(15 * time.Second)
drained:
	for {
		select {
		case v := <-kw:
			if v != "" {
				kubeletSaw++
			}
		case <-drain:
			break drained
		}
	}
	elapsed := time.Since(start)
	lists := kubeletLists(t, k) - lists0
	slices.Sort(delays)
	return fmt.Sprintf("| an annotation edit, on the watch (%d edits; podsapi: resync every 10 s) | %d of %d seen in 15 s | median %.1f s, max %.1f s; %.0f ListPods of the kubelet in %.0f s (%.2f tokens/s) | |",
		edits, kubeletSaw, edits, delays[len(delays)/2].Seconds(), delays[len(delays)-1].Seconds(), lists, elapsed.Seconds(), lists/elapsed.Seconds())
}

// kubeletLists is the kubelet's kubelet_pod_requests_list_total, all codes.
func kubeletLists(t *testing.T, k *realkubelet.Kubelet) float64 {
	t.Helper()
	resp, err := http.Get(k.ReadOnlyURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for l := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "kubelet_pod_requests_list_total{"); ok {
			f := strings.Fields(rest)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			total += v
		}
	}
	return total
}
