package bench

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/internal/rigs/childproc"
	"github.com/podsapi/podsapi/internal/rigs/kubetest"
	"github.com/podsapi/podsapi/internal/rigs/podstest"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/source/apiserver"
	"github.com/podsapi/podsapi/store"
)

// The control plane's load (issue 21, item 5): N agents on one node, each
// following the node's pods either with its own client-go informer against
// the API server (direct), or with a WatchPods stream of one podsapi that
// watches the API server (podsapi), under the same churn of status updates.
// A real kube-apiserver and etcd (internal/rigs/kubetest) are measured from their
// own /metrics and /proc. Run it with `make bench-apiserver`, which writes
// internal/rigs/bench/apiserver.md; docs/benchmarks.md embeds that file.

var apiserverLoad = flag.String("apiserver-load", "", "measure the API server's load (needs PODSAPI_KUBE_BIN) and write the markdown to this file")

const (
	loadNode       = "node-a"
	loadNodePods   = 30  // Pods of the measured node.
	loadOtherPods  = 300 // Pods of other nodes, which no agent asks for.
	loadUpdates    = 300 // Status updates of the node's pods, ...
	loadUpdateRate = 50  // ... per second.
	loadTimeout    = 2 * time.Minute
)

// cpResult is one scenario's figures.
type cpResult struct {
	mode     string
	agents   int
	watchers float64 // Pod watches open on the API server, at the end of the churn.
	requests float64 // LIST and WATCH requests of pods.
	bytes    float64 // Bytes of LIST answers and watch events of pods.
	cpu      float64 // API server CPU seconds.
	p50, p99 time.Duration
	events   int // Update events received by the agents.
}

func TestAPIServerLoad(t *testing.T) {
	if *apiserverLoad == "" {
		t.Skip("-apiserver-load is not set: run make bench-apiserver")
	}
	cp := kubetest.Start(t)
	nodePods := seedLoadPods(t, cp.Admin)
	// The API server's own pod watch (one, of every pod) and the writer's
	// requests load it without any agent: measured alone, then taken off
	// each scenario's figures.
	var baseline cpResult
	t.Run("baseline", func(t *testing.T) { baseline = measureLoad(t, cp, nodePods, "none", 0) })
	results := []cpResult{baseline}
	for _, n := range []int{10, 50} {
		for _, mode := range []string{"direct", "podsapi"} {
			t.Run(fmt.Sprintf("%s-%d", mode, n), func(t *testing.T) {
				r := measureLoad(t, cp, nodePods, mode, n)
				t.Logf("%+v", r)
				results = append(results, r)
			})
		}
	}
	if err := os.WriteFile(*apiserverLoad, []byte(loadMarkdown(results)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// seedLoadPods creates the pods and returns those of loadNode.
func seedLoadPods(t *testing.T, c *kubernetes.Clientset) []*corev1.Pod {
	t.Helper()
	ctx := t.Context()
	for i := range 10 {
		if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ns-%02d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var mine []*corev1.Pod
	for i := range loadNodePods + loadOtherPods {
		p := podstest.Pod(fmt.Sprintf("ns-%02d", i%10), fmt.Sprintf("pod-%05d-x7k2q", i), i)
		p.UID, p.ResourceVersion, p.Status = "", "", corev1.PodStatus{}
		p.Spec.NodeName = fmt.Sprintf("node-%d", i%20)
		if i < loadNodePods {
			p.Spec.NodeName = loadNode
		}
		created, err := c.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if i < loadNodePods {
			mine = append(mine, created)
		}
	}
	return mine
}

// arrivals records, for each agent, when it saw each update.
type arrivals struct {
	mu      sync.Mutex
	seen    []map[int]time.Time // Per agent: update number → arrival.
	lastAll chan struct{}       // Closed when every agent saw the last update.
	done    int
}

func newArrivals(n int) *arrivals {
	a := &arrivals{seen: make([]map[int]time.Time, n), lastAll: make(chan struct{})}
	for i := range a.seen {
		a.seen[i] = make(map[int]time.Time)
	}
	if n == 0 {
		close(a.lastAll)
	}
	return a
}

// record notes that agent saw the pod status message msg.
func (a *arrivals) record(agent int, msg string) {
	seq, err := strconv.Atoi(strings.TrimPrefix(msg, "update-"))
	if err != nil || !strings.HasPrefix(msg, "update-") {
		return
	}
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.seen[agent][seq]; ok {
		return
	}
	a.seen[agent][seq] = now
	if seq == loadUpdates {
		a.done++
		if a.done == len(a.seen) {
			close(a.lastAll)
		}
	}
}

func measureLoad(t *testing.T, cp *kubetest.ControlPlane, nodePods []*corev1.Pod, mode string, n int) cpResult {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	stop := func() {
		cancel()
		wg.Wait()
	}
	defer stop()
	arr := newArrivals(n)
	before := scrape(t, cp)
	cpu0 := apiserverCPU(t, cp)

	synced := make(chan struct{}, n)
	switch mode {
	case "none":
	case "direct":
		for i := range n {
			cfg := rest.CopyConfig(cp.AdminConfig)
			// A dialer of its own: an uncached transport, one connection
			// per agent, as separate agent processes have.
			cfg.Dial = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
			cfg.ContentType = "application/vnd.kubernetes.protobuf"
			client := kubernetes.NewForConfigOrDie(cfg)
			sel := fields.OneTermEqualSelector("spec.nodeName", loadNode).String()
			lw := &cache.ListWatch{
				ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
					o.FieldSelector = sel
					return client.CoreV1().Pods("").List(ctx, o)
				},
				WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
					o.FieldSelector = sel
					return client.CoreV1().Pods("").Watch(ctx, o)
				},
			}
			inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, client), &corev1.Pod{}, 0, nil)
			agent := i
			if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj any) {
				arr.record(agent, obj.(*corev1.Pod).Status.Message)
			}}); err != nil {
				t.Fatal(err)
			}
			wg.Go(func() { inf.RunWithContext(ctx) })
			wg.Go(func() {
				if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
					synced <- struct{}{}
				}
			})
		}
	case "podsapi":
		st := store.New()
		srv := podstest.Start(t, st, server.Config{Limits: server.LimitsConfig{QPS: -1}, Watch: server.WatchConfig{Queue: 100000}})
		src := apiserver.New(loadNode, apiserver.WithKubeconfig(cp.Kubeconfig(t, kubetest.AdminUser, cp.Host())))
		wg.Go(func() { _ = src.Run(ctx, st) })
		for i := range n {
			client := podstest.ConnectClient(t, srv.SocketPath())
			agent := i
			wg.Go(func() {
				var stream *connect.ServerStreamForClient[podsv1alpha1.PodWatchResponse]
				for ctx.Err() == nil { // FAILED_PRECONDITION until podsapi synced.
					s, err := client.WatchPods(ctx, connect.NewRequest(&podsv1alpha1.PodWatchRequest{}))
					if err == nil && s.Receive() {
						stream = s
						break
					}
					if s != nil {
						_ = s.Close()
					}
					select {
					case <-ctx.Done():
					case <-time.After(10 * time.Millisecond):
					}
				}
				if stream == nil {
					return
				}
				defer stream.Close()
				for {
					msg := stream.Msg()
					switch msg.GetType() {
					case podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE:
						synced <- struct{}{}
					case podsv1alpha1.EventType_EVENT_TYPE_MODIFIED:
						arr.record(agent, msg.GetPod().GetStatus().GetMessage())
					}
					if !stream.Receive() {
						return
					}
				}
			})
		}
	}
	timeout := time.NewTimer(loadTimeout)
	defer timeout.Stop()
	for range n {
		select {
		case <-synced:
		case <-timeout.C:
			t.Fatalf("%s: the agents did not sync within %v", mode, loadTimeout)
		}
	}

	// The churn: status updates at a steady rate, written from the objects
	// the updates return (no reads).
	sent := make(map[int]time.Time, loadUpdates)
	pods := nodePods // Updated in place: the next scenario writes from the latest versions.
	ticker := time.NewTicker(time.Second / loadUpdateRate)
	for seq := 1; seq <= loadUpdates; seq++ {
		<-ticker.C
		i := seq % len(pods)
		p := pods[i].DeepCopy()
		p.Status.Message = fmt.Sprintf("update-%d", seq)
		sent[seq] = time.Now()
		updated, err := cp.Admin.CoreV1().Pods(p.Namespace).UpdateStatus(t.Context(), p, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pods[i] = updated
	}
	ticker.Stop()
	select {
	case <-arr.lastAll:
	case <-timeout.C:
		t.Fatalf("%s: the agents did not see the last update within %v", mode, loadTimeout)
	}
	during := scrape(t, cp)
	cpu1 := apiserverCPU(t, cp)
	// A watch request is counted in apiserver_request_total when it ends:
	// stop the agents and wait until their watches are closed.
	stop()
	watches := map[string]string{"resource": "pods", "verb": "WATCH"}
	after := scrape(t, cp)
	for after.gauge("apiserver_longrunning_requests", watches) > before.gauge("apiserver_longrunning_requests", watches) {
		select {
		case <-timeout.C:
			t.Fatalf("%s: the agents' watches did not end within %v", mode, loadTimeout)
		case <-time.After(50 * time.Millisecond):
		}
		after = scrape(t, cp)
	}
	r := cpResult{mode: mode, agents: n, cpu: cpu1 - cpu0,
		watchers: during.gauge("apiserver_longrunning_requests", watches) - before.gauge("apiserver_longrunning_requests", watches),
		requests: after.sum("apiserver_request_total", map[string]string{"resource": "pods", "verb": "LIST"}) -
			before.sum("apiserver_request_total", map[string]string{"resource": "pods", "verb": "LIST"}) +
			after.sum("apiserver_request_total", map[string]string{"resource": "pods", "verb": "WATCH"}) -
			before.sum("apiserver_request_total", map[string]string{"resource": "pods", "verb": "WATCH"}),
		bytes: after.histSum("apiserver_response_sizes", map[string]string{"resource": "pods", "verb": "LIST"}) -
			before.histSum("apiserver_response_sizes", map[string]string{"resource": "pods", "verb": "LIST"}) +
			after.histSum("apiserver_watch_events_sizes", map[string]string{"resource": "pods"}) -
			before.histSum("apiserver_watch_events_sizes", map[string]string{"resource": "pods"}),
	}
	t.Logf("%s-%d: LIST %v WATCH %v requests; LIST %v, watch events %v bytes (%v events)", mode, n,
		after.sum("apiserver_request_total", map[string]string{"resource": "pods", "verb": "LIST"})-before.sum("apiserver_request_total", map[string]string{"resource": "pods", "verb": "LIST"}),
		after.sum("apiserver_request_total", watches)-before.sum("apiserver_request_total", watches),
		after.histSum("apiserver_response_sizes", map[string]string{"resource": "pods", "verb": "LIST"})-before.histSum("apiserver_response_sizes", map[string]string{"resource": "pods", "verb": "LIST"}),
		after.histSum("apiserver_watch_events_sizes", map[string]string{"resource": "pods"})-before.histSum("apiserver_watch_events_sizes", map[string]string{"resource": "pods"}),
		after.sum("apiserver_watch_events_total", map[string]string{"resource": "pods"})-before.sum("apiserver_watch_events_total", map[string]string{"resource": "pods"}))
	var delays []time.Duration
	arr.mu.Lock()
	for _, seen := range arr.seen {
		for seq, at := range seen {
			delays = append(delays, at.Sub(sent[seq]))
		}
	}
	arr.mu.Unlock()
	slices.Sort(delays)
	r.events = len(delays)
	if len(delays) > 0 {
		r.p50 = delays[len(delays)/2]
		r.p99 = delays[min(len(delays)-1, len(delays)*99/100)]
	}
	return r
}

// apiMetrics are the API server's metrics at one moment.
type apiMetrics map[string]*dto.MetricFamily

func scrape(t *testing.T, cp *kubetest.ControlPlane) apiMetrics {
	t.Helper()
	client, err := kubernetes.NewForConfig(cp.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// each calls f with every metric of name whose labels include labels.
func (m apiMetrics) each(name string, labels map[string]string, f func(*dto.Metric)) {
	fam := m[name]
	if fam == nil {
		return
	}
	for _, met := range fam.GetMetric() {
		have := make(map[string]string)
		for _, l := range met.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		ok := true
		for k, v := range labels {
			ok = ok && have[k] == v
		}
		if ok {
			f(met)
		}
	}
}

func (m apiMetrics) sum(name string, labels map[string]string) float64 {
	var v float64
	m.each(name, labels, func(met *dto.Metric) { v += met.GetCounter().GetValue() })
	return v
}

func (m apiMetrics) gauge(name string, labels map[string]string) float64 {
	var v float64
	m.each(name, labels, func(met *dto.Metric) { v += met.GetGauge().GetValue() })
	return v
}

func (m apiMetrics) histSum(name string, labels map[string]string) float64 {
	var v float64
	m.each(name, labels, func(met *dto.Metric) { v += met.GetHistogram().GetSampleSum() })
	return v
}

// apiserverCPU returns the CPU seconds the API server has used.
func apiserverCPU(t *testing.T, cp *kubetest.ControlPlane) float64 {
	t.Helper()
	d, err := childproc.CPU(cp.APIServerPID())
	if err != nil {
		t.Fatal(err)
	}
	return d.Seconds()
}

func loadMarkdown(results []cpResult) string {
	base := results[0]
	for i := range results[1:] {
		r := &results[i+1]
		r.watchers -= base.watchers
		r.requests -= base.requests
		r.bytes -= base.bytes
		r.cpu -= base.cpu
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, `## The control plane's load: agents direct or through podsapi (issue 21)

A real kube-apiserver v1.37.2 on etcd 3.7.0 (loopback, no other client) holds %d pods of one node and %d of
19 others. N agents follow the node's pods, either each with its own client-go informer (field selector
spec.nodeName, WatchList, its own connection: **direct**), or each with a WatchPods stream of one podsapi
(--source=apiserver, one informer-equivalent reflector: **podsapi**). From the agents' start to the last
agent's receipt of the last of %d status updates written at %d/s (the same churn in both), measured at the
API server: its pod watches open at the end (apiserver_longrunning_requests), the LIST and WATCH requests
of pods (apiserver_request_total), the bytes of pod LIST answers and watch events it sent
(apiserver_response_sizes, apiserver_watch_events_sizes), its CPU (/proc, utime+stime), and the delay from
the start of each status update to its event at each agent. The first four are above a baseline measured in
the same run with the same churn and no agent (first row: the writer's %d updates and the API server's own
watch of every pod), so that they are what the agents cost; the API server's CPU moves by about 0.1 s from
run to run, so a CPU figure below that is noise. Ratios are podsapi ÷ direct in the same run. Written by `+"`make bench-apiserver`"+` (internal/rigs/bench/controlplane_test.go)
into internal/rigs/bench/apiserver.md, which this file embeds.

| agents | feed | pod watches | LIST+WATCH requests | bytes sent | API server CPU | event delay p50 | p99 | events |
|---:|---|---:|---:|---:|---:|---:|---:|---:|
`, loadNodePods, loadOtherPods, loadUpdates, loadUpdateRate, loadUpdates)
	byKey := make(map[string]cpResult)
	fmt.Fprintf(&sb, "| 0 | baseline (no agent; not subtracted) | %.0f | %.0f | %s | %.2f s | | | |\n", base.watchers, base.requests, fmtBytes(base.bytes), base.cpu)
	for _, r := range results[1:] {
		byKey[fmt.Sprintf("%s-%d", r.mode, r.agents)] = r
		fmt.Fprintf(&sb, "| %d | %s | %.0f | %.0f | %s | %.2f s | %s | %s | %d |\n", r.agents, r.mode, r.watchers, r.requests,
			fmtBytes(r.bytes), r.cpu, r.p50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond), r.events)
	}
	sb.WriteString("\n| agents | watches ÷ | requests ÷ | bytes ÷ | CPU ÷ | p50 ÷ | p99 ÷ |\n|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, n := range []int{10, 50} {
		d, p := byKey[fmt.Sprintf("direct-%d", n)], byKey[fmt.Sprintf("podsapi-%d", n)]
		div := func(a, b float64) string {
			if b == 0 {
				return "—"
			}
			return fmt.Sprintf("%.2f", a/b)
		}
		cpuRatio := div(p.cpu, d.cpu)
		if p.cpu <= 0 || d.cpu <= 0 {
			cpuRatio = "within noise"
		}
		fmt.Fprintf(&sb, "| %d | %s | %s | %s | %s | %s | %s |\n", n, div(p.watchers, d.watchers), div(p.requests, d.requests),
			div(p.bytes, d.bytes), cpuRatio, div(float64(p.p50), float64(d.p50)), div(float64(p.p99), float64(d.p99)))
	}
	return sb.String()
}
