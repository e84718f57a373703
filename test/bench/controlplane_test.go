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
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/source/apiserver"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/childproc"
	"github.com/podsapi/podsapi/test/kubetest"
	"github.com/podsapi/podsapi/test/podstest"
)

// The control plane's load (issue 21, item 5; issue 32, item 6): N agents
// on one node, each following the node's pods either with its own client-go
// informer against the API server (direct), or with a WatchPods stream of
// one podsapi that watches the API server (podsapi), or with the same
// informer against podsapi's Kubernetes API (front door), under the same
// churn of status updates; and a fleet of K nodes with M informers each,
// direct or each node through a front door of its own. A real
// kube-apiserver and etcd (test/kubetest) are measured from their
// own /metrics and /proc. Run it with `make bench-apiserver`, which writes
// test/bench/apiserver.md; docs/benchmarks.md embeds that file.

var (
	apiserverLoad = flag.String("apiserver-load", "", "measure the API server's load (needs PODSAPI_KUBE_BIN) and write the markdown to this file")
	loadAgents    = flag.String("apiserver-agents", "10,50", "agent counts N of the one-node measurement")
	fleetNodes    = flag.Int("apiserver-fleet-nodes", 50, "nodes K of the fleet measurement, each with a front door of its own (0 skips the fleet)")
	fleetAgents   = flag.Int("apiserver-fleet-agents", 5, "informers M per node of the fleet measurement")
	fleetPods     = flag.Int("apiserver-fleet-pods", 4, "pods per node of the fleet")
	fleetUpdates  = flag.Int("apiserver-fleet-updates", 500, "status updates of the fleet's pods (at 50/s)")
)

const (
	loadNode       = "node-a"
	loadNodePods   = 30  // Pods of the measured node.
	loadOtherPods  = 300 // Pods of other nodes, which no agent asks for.
	loadUpdates    = 300 // Status updates of the node's pods, ...
	loadUpdateRate = 50  // ... per second.
	loadTimeout    = 2 * time.Minute
)

// Feeds of the agents.
const (
	feedNone      = "none"       // No agent: the baseline.
	feedDirect    = "direct"     // Informers on the API server.
	feedPodsAPI   = "podsapi"    // WatchPods streams of one podsapi (gRPC).
	feedFrontDoor = "front door" // Informers on podsapi's Kubernetes API, a podsapi per node.
)

// loadScenario is what one measurement runs.
type loadScenario struct {
	feed    string
	nodes   []string      // The nodes whose agents run, perNode each.
	perNode int           // Agents per node.
	pods    []*corev1.Pod // The pods the churn updates, in turn; updated in place.
	updates int           // Status updates of the churn, at loadUpdateRate.
}

// cpResult is one scenario's figures.
type cpResult struct {
	feed     string
	nodes    int     // Nodes with agents.
	agents   int     // Agents, all nodes together.
	watchers float64 // Pod watches open on the API server, at the end of the churn.
	requests float64 // LIST and WATCH requests of pods.
	bytes    float64 // Bytes of LIST answers and watch events of pods.
	cpu      float64 // API server CPU seconds, the whole scenario.
	syncCPU  float64 // API server CPU seconds from the agents' start to their sync (their lists).
	churnCPU float64 // API server CPU seconds during the churn.
	rss      float64 // API server resident memory at the end of the churn, bytes.
	heap     float64 // API server live heap at the end of the churn (go_gc_heap_live_bytes: marked by the last GC), bytes.
	// The front doors' CPU seconds (from /proc of their processes) from the
	// agents' start to their sync, and during the churn; their resident
	// memory at the end of the churn.
	doorSyncCPU, doorChurnCPU, doorRSS float64
	p50, p99                           time.Duration
	events                             int // Update events received by the agents.
}

func TestAPIServerLoad(t *testing.T) {
	if *apiserverLoad == "" {
		t.Skip("-apiserver-load is not set: run make bench-apiserver")
	}
	var counts []int
	for f := range strings.SplitSeq(*loadAgents, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			t.Fatalf("-apiserver-agents=%q: want positive counts", *loadAgents)
		}
		counts = append(counts, n)
	}
	cp := kubetest.Start(t)
	nodePods := seedLoadPods(t, cp.Admin)
	// The API server's own pod watch (one, of every pod) and the writer's
	// requests load it without any agent: measured alone, then taken off
	// each scenario's figures.
	one := func(feed string, n int) loadScenario {
		return loadScenario{feed: feed, nodes: []string{loadNode}, perNode: n, pods: nodePods, updates: loadUpdates}
	}
	var baseline cpResult
	t.Run("baseline", func(t *testing.T) { baseline = measureLoad(t, cp, one(feedNone, 0)) })
	results := []cpResult{baseline}
	for _, n := range counts {
		for _, feed := range []string{feedDirect, feedPodsAPI, feedFrontDoor} {
			t.Run(fmt.Sprintf("%s-%d", strings.ReplaceAll(feed, " ", "-"), n), func(t *testing.T) {
				r := measureLoad(t, cp, one(feed, n))
				t.Logf("%+v", r)
				results = append(results, r)
			})
		}
	}
	var fleet []cpResult
	if *fleetNodes > 0 {
		fleet = measureFleet(t)
	}
	if err := os.WriteFile(*apiserverLoad, []byte(loadMarkdown(counts, results, fleet)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// measureFleet measures the fleet: K nodes of M informers each, direct or
// each node through a front door of its own, and the baseline, each on a
// control plane of its own (so that the API server's memory is its own),
// seeded with the same pods and churned the same way.
func measureFleet(t *testing.T) []cpResult {
	k, m := *fleetNodes, max(*fleetAgents, 1)
	type shape struct{ k, m int }
	shapes := []shape{{k, 1}, {k, m}}
	if k/2 > 0 && k/2 < k {
		shapes = append([]shape{{k / 2, m}}, shapes...)
	}
	shapes = slices.CompactFunc(shapes, func(a, b shape) bool { return a == b })
	var results []cpResult
	run := func(feed string, s shape) {
		t.Run(fmt.Sprintf("fleet-%s-%dx%d", strings.ReplaceAll(feed, " ", "-"), s.k, s.m), func(t *testing.T) {
			cp := kubetest.Start(t)
			nodes, pods := seedFleet(t, cp.Admin, k, *fleetPods)
			r := measureLoad(t, cp, loadScenario{feed: feed, nodes: nodes[:s.k], perNode: s.m, pods: pods, updates: *fleetUpdates})
			t.Logf("%+v", r)
			results = append(results, r)
		})
	}
	run(feedNone, shape{k, 0})
	for _, s := range shapes {
		run(feedDirect, s)
		run(feedFrontDoor, s)
	}
	return results
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

// seedFleet creates perNode pods on each of k nodes, and returns the nodes
// and the pods, pod i on node i mod k (so that the churn, which updates
// them in turn, reaches the nodes in turn).
func seedFleet(t *testing.T, c *kubernetes.Clientset, k, perNode int) ([]string, []*corev1.Pod) {
	t.Helper()
	ctx := t.Context()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nodes := make([]string, k)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("fleet-%03d", i)
	}
	var pods []*corev1.Pod
	for i := range k * max(perNode, 1) {
		p := podstest.Pod("fleet", fmt.Sprintf("pod-%05d-x7k2q", i), i)
		p.UID, p.ResourceVersion, p.Status = "", "", corev1.PodStatus{}
		p.Spec.NodeName = nodes[i%k]
		created, err := c.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pods = append(pods, created)
	}
	return nodes, pods
}

// arrivals records, for each agent, when it saw each update.
type arrivals struct {
	mu      sync.Mutex
	seen    []map[int]time.Time // Per agent: update number → arrival.
	want    []int               // Per agent: the last update it must see (0: none).
	lastAll chan struct{}       // Closed when every agent saw its last update.
	left    int
}

func newArrivals(want []int) *arrivals {
	a := &arrivals{seen: make([]map[int]time.Time, len(want)), want: want, lastAll: make(chan struct{})}
	for i := range a.seen {
		a.seen[i] = make(map[int]time.Time)
		if want[i] > 0 {
			a.left++
		}
	}
	if a.left == 0 {
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
	if seq == a.want[agent] {
		a.left--
		if a.left == 0 {
			close(a.lastAll)
		}
	}
}

// startInformer starts an unchanged client-go informer of the pods of node
// (field selector spec.nodeName, WatchList, protobuf) on the server cfg
// reaches, with a connection of its own, as a separate agent process has.
// It calls onUpdate with every updated pod, and sends on synced once its
// cache has synced. It stops when ctx ends.
func startInformer(t *testing.T, ctx context.Context, wg *sync.WaitGroup, cfg *rest.Config, node string, onUpdate func(*corev1.Pod), synced chan<- struct{}) {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	// A dialer of its own: an uncached transport, one connection per agent.
	cfg.Dial = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	client := kubernetes.NewForConfigOrDie(cfg)
	sel := fields.OneTermEqualSelector("spec.nodeName", node).String()
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
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj any) {
		onUpdate(obj.(*corev1.Pod))
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

func measureLoad(t *testing.T, cp *kubetest.ControlPlane, sc loadScenario) cpResult {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	stop := func() {
		cancel()
		wg.Wait()
	}
	defer stop()
	n := len(sc.nodes) * sc.perNode
	if sc.feed == feedNone {
		n = 0
	}
	// The last update of each node: the last its agents must see.
	last := make(map[string]int)
	for seq := 1; seq <= sc.updates; seq++ {
		last[sc.pods[seq%len(sc.pods)].Spec.NodeName] = seq
	}
	want := make([]int, n)
	for a := range want {
		want[a] = last[sc.nodes[a/sc.perNode]]
	}
	arr := newArrivals(want)
	before := scrape(t, cp)
	cpu0 := apiserverCPU(t, cp)

	var doors []*frontDoor
	var doorCPU0 float64
	synced := make(chan struct{}, n)
	switch sc.feed {
	case feedNone:
	case feedDirect:
		for a := range n {
			startInformer(t, ctx, &wg, cp.AdminConfig, sc.nodes[a/sc.perNode], func(p *corev1.Pod) { arr.record(a, p.Status.Message) }, synced)
		}
	case feedFrontDoor:
		// Stopped below, after the informers, or at the test's end.
		doors = startFrontDoors(t, cp.Kubeconfig(t, kubetest.AdminUser, cp.Host()), cp.AdminConfig.BearerToken, sc.nodes)
		doorCPU0 = doorsCPU(t, doors)
		for a := range n {
			startInformer(t, ctx, &wg, doors[a/sc.perNode].cfg, sc.nodes[a/sc.perNode], func(p *corev1.Pod) { arr.record(a, p.Status.Message) }, synced)
		}
	case feedPodsAPI:
		if len(sc.nodes) != 1 {
			t.Fatalf("the podsapi feed serves one node, not %d", len(sc.nodes))
		}
		st := store.New()
		srv := podstest.Start(t, st, server.Config{Limits: server.LimitsConfig{QPS: -1}, Watch: server.WatchConfig{Queue: 100000}})
		src := apiserver.New(sc.nodes[0], apiserver.WithKubeconfig(cp.Kubeconfig(t, kubetest.AdminUser, cp.Host())))
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
	default:
		t.Fatalf("unknown feed %q", sc.feed)
	}
	timeout := time.NewTimer(loadTimeout)
	defer timeout.Stop()
	for range n {
		select {
		case <-synced:
		case <-timeout.C:
			t.Fatalf("%s: the agents did not sync within %v", sc.feed, loadTimeout)
		}
	}
	cpuSynced := apiserverCPU(t, cp)
	var doorCPUSynced float64
	if doors != nil {
		doorCPUSynced = doorsCPU(t, doors)
	}

	// The churn: status updates at a steady rate, written from the objects
	// the updates return (no reads).
	sent := make(map[int]time.Time, sc.updates)
	pods := sc.pods // Updated in place: the next scenario writes from the latest versions.
	ticker := time.NewTicker(time.Second / loadUpdateRate)
	for seq := 1; seq <= sc.updates; seq++ {
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
		t.Fatalf("%s: the agents did not see the last update within %v", sc.feed, loadTimeout)
	}
	during := scrape(t, cp)
	cpu1 := apiserverCPU(t, cp)
	rss, err := childproc.RSS(cp.APIServerPID())
	if err != nil {
		t.Fatal(err)
	}
	r := cpResult{feed: sc.feed, nodes: len(sc.nodes), agents: n, rss: float64(rss), heap: during.gauge("go_gc_heap_live_bytes", nil)}
	if doors != nil {
		r.doorSyncCPU = doorCPUSynced - doorCPU0
		r.doorChurnCPU = doorsCPU(t, doors) - doorCPUSynced
		r.doorRSS = doorsRSS(t, doors)
	}
	// A watch request is counted in apiserver_request_total when it ends:
	// stop the agents (and the front doors' own watches) and wait until
	// their watches are closed.
	stop()
	if doors != nil {
		stopFrontDoors(t, doors)
	}
	watches := map[string]string{"resource": "pods", "verb": "WATCH"}
	after := scrape(t, cp)
	for after.gauge("apiserver_longrunning_requests", watches) > before.gauge("apiserver_longrunning_requests", watches) {
		select {
		case <-timeout.C:
			t.Fatalf("%s: the agents' watches did not end within %v", sc.feed, loadTimeout)
		case <-time.After(50 * time.Millisecond):
		}
		after = scrape(t, cp)
	}
	lists := map[string]string{"resource": "pods", "verb": "LIST"}
	r.cpu, r.syncCPU, r.churnCPU = cpu1-cpu0, cpuSynced-cpu0, cpu1-cpuSynced
	r.watchers = during.gauge("apiserver_longrunning_requests", watches) - before.gauge("apiserver_longrunning_requests", watches)
	r.requests = after.sum("apiserver_request_total", lists) - before.sum("apiserver_request_total", lists) +
		after.sum("apiserver_request_total", watches) - before.sum("apiserver_request_total", watches)
	r.bytes = after.histSum("apiserver_response_sizes", lists) - before.histSum("apiserver_response_sizes", lists) +
		after.histSum("apiserver_watch_events_sizes", map[string]string{"resource": "pods"}) -
		before.histSum("apiserver_watch_events_sizes", map[string]string{"resource": "pods"})
	t.Logf("%s %dx%d: LIST %v WATCH %v requests; LIST %v, watch events %v bytes (%v events)", sc.feed, len(sc.nodes), sc.perNode,
		after.sum("apiserver_request_total", lists)-before.sum("apiserver_request_total", lists),
		after.sum("apiserver_request_total", watches)-before.sum("apiserver_request_total", watches),
		after.histSum("apiserver_response_sizes", lists)-before.histSum("apiserver_response_sizes", lists),
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
