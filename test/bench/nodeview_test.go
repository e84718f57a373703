package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/podsapi/podsapi/test/childproc"
	"github.com/podsapi/podsapi/test/kubetest"
	"github.com/podsapi/podsapi/test/podstest"
)

// The node's view (issue 46, item 6): what the agents of a node that
// describe its pods (their namespace, their node, their owners) cost the
// API server, read directly, through the door's full view or through its
// node view, side by side in one run against a real kube-apiserver and
// etcd (test/kubetest) and the real podsapi-server:
//
//   - one node of N k8sattributes-like agents (viewAgent): the API
//     server's watches, requests and the bytes it sends the node;
//   - ReplicaSet churn on other nodes: the bytes that reach the node, and
//     the agents' connections;
//   - a cluster of many ReplicaSets: the heap of an unchanged metadata-only
//     ReplicaSet informer, directly and through the node view, and
//     podsapi-server's RSS;
//   - a fleet of K nodes of M agents: the API server's watches and bytes.
//
// Bytes are counted on the wire (TLS included) by kubetest.Proxy: every
// client of the node (the direct agents, or podsapi-server) reaches the API
// server through one, and the agents reach the door through another. Run
// it with `make bench-nodeview`, which writes test/bench/nodeview.md;
// docs/benchmarks.md embeds that file.

var (
	nodeViewOut        = flag.String("nodeview", "", "measure the node's view (needs PODSAPI_KUBE_BIN) and write the markdown to this file")
	nodeViewFeeds      = flag.String("nodeview-feeds", "direct,full,node", "the feeds measured: direct, full (the door's full view), node (its node view)")
	nodeViewAgents     = flag.Int("nodeview-agents", 10, "agents N of the one-node measurement (0 skips it)")
	nodeViewPods       = flag.Int("nodeview-pods", 110, "pods of the measured node, 3 per ReplicaSet")
	nodeViewRS         = flag.Int("nodeview-replicasets", 2000, "ReplicaSets of the one-node measurement's cluster")
	nodeViewChurn      = flag.Int("nodeview-churn", 100, "ReplicaSet status changes per second on other nodes, one-node measurement")
	nodeViewChurnFor   = flag.Duration("nodeview-churn-duration", 10*time.Second, "how long the churn lasts")
	nodeViewBigRS      = flag.Int("nodeview-big-replicasets", 50000, "ReplicaSets of the metadata informer's cluster (0 skips it)")
	nodeViewFleetNodes = flag.Int("nodeview-fleet-nodes", 50, "nodes K of the fleet, each with a podsapi-server of its own in the views (0 skips it)")
	nodeViewFleetM     = flag.Int("nodeview-fleet-agents", 5, "agents M per node of the fleet")
	nodeViewFleetPods  = flag.Int("nodeview-fleet-pods", 6, "pods per node of the fleet")
	nodeViewFleetRS    = flag.Int("nodeview-fleet-replicasets", 500, "ReplicaSets of the fleet's cluster")
	nodeViewFleetChurn = flag.Int("nodeview-fleet-churn", 10, "ReplicaSet status changes per second in the fleet, for -nodeview-churn-duration")
	nodeViewServerArgs = flag.String("nodeview-server-args", "--workloads=apiserver", "podsapi-server's flags beyond the rig's (source, node, kubeconfig, sockets, door address and certificate)")
)

// nodeViewPath is the node view's path under the door's URL.
const nodeViewPath = "/views/node"

// The feeds of the node's-view measurement, by their flag name.
const (
	feedFullView = "full view" // The agents on the door's URL.
	feedNodeView = "node view" // The agents on the door's URL + nodeViewPath.
)

var viewFeedNames = map[string]string{"direct": feedDirect, "full": feedFullView, "node": feedNodeView}

const (
	viewNode       = "node-a" // The node of the one-node and informer measurements.
	viewNamespaces = 20       // Namespaces of the clusters, the ReplicaSets spread over them.
	podsPerOwner   = 3        // Pods of a measured node per ReplicaSet.
	churnWorkers   = 16       // Writers of the churn, so that a slow answer does not slow the rate.
)

// viewResult is one feed's figures of a one-node or fleet measurement.
type viewResult struct {
	feed          string
	nodes, agents int
	// watches are the API server's watches open at the end of the churn,
	// by resource, above those before the scenario.
	watches map[string]float64
	// lists are the LIST and WATCH requests of every resource, gets the
	// GET requests, reviews the TokenReviews and SubjectAccessReviews, that
	// the API server received during the scenario.
	lists, gets, reviews float64
	// syncBytes are the bytes the API server sent the nodes from the
	// start to the agents' sync (podsapi-server's start included),
	// churnBytes those during the churn; agentChurnBytes those that
	// reached the agents' connections during the churn.
	syncBytes, churnBytes, agentChurnBytes float64
	sync                                   time.Duration // From the start to the agents' sync.
	serving                                time.Duration // From the start to every podsapi-server's SERVING.
	updates                                int           // ReplicaSet changes of the churn.
	rsEvents                               int64         // ReplicaSet updates the agents received during the churn.
	cpu                                    float64       // The API server's CPU seconds, the whole scenario.
	serverRSS, serverCPU                   float64       // podsapi-servers' resident memory at the end and CPU seconds, together.
}

// informerResult is one feed's figures of the metadata informer.
type informerResult struct {
	feed      string
	objects   int
	sync      time.Duration
	heap      int64
	bytes     float64 // Sent by the API server to the node (podsapi-server's start included).
	serverRSS int64
}

// nodeViewResults are the figures of a run.
type nodeViewResults struct {
	start    time.Time
	oneNode  []viewResult
	informer []informerResult
	fleet    []viewResult
}

func TestNodeView(t *testing.T) {
	if *nodeViewOut == "" {
		t.Skip("-nodeview is not set: run make bench-nodeview")
	}
	var feeds []string
	for f := range strings.SplitSeq(*nodeViewFeeds, ",") {
		name, ok := viewFeedNames[strings.TrimSpace(f)]
		if !ok {
			t.Fatalf("-nodeview-feeds=%q: want direct, full or node", *nodeViewFeeds)
		}
		feeds = append(feeds, name)
	}
	res := nodeViewResults{start: time.Now()}
	bin := serverBinary(t, t.TempDir())
	serverArgs := strings.Fields(*nodeViewServerArgs)
	defer func() {
		if err := os.WriteFile(*nodeViewOut, []byte(nodeViewMarkdown(res)), 0o644); err != nil {
			t.Error(err)
		}
	}()

	// views measures the agents of nodes, perNode each, in a cluster of
	// its own, through each feed in turn, into results as each is
	// measured (the figures before a failure are written).
	views := func(t *testing.T, results *[]viewResult, nodes []string, pods, replicaSets, perNode, rate int) {
		cp := kubetest.Start(t)
		seed := seedViewCluster(t, cp, nodes, pods, replicaSets)
		for _, feed := range feeds {
			sc := viewScenario{feed: feed, nodes: seed.nodes, perNode: perNode, churn: seed.others, rate: rate, during: *nodeViewChurnFor}
			r := measureView(t, cp, bin, serverArgs, sc)
			t.Logf("%+v", r)
			*results = append(*results, r)
		}
	}
	if *nodeViewAgents > 0 {
		t.Run("one-node", func(t *testing.T) {
			views(t, &res.oneNode, []string{viewNode}, *nodeViewPods, *nodeViewRS, *nodeViewAgents, *nodeViewChurn)
		})
	}
	if *nodeViewBigRS > 0 {
		t.Run("informer", func(t *testing.T) {
			cp := kubetest.Start(t)
			seedViewCluster(t, cp, []string{viewNode}, *nodeViewPods, *nodeViewBigRS)
			for _, feed := range feeds {
				if feed == feedFullView {
					continue // It passes ReplicaSets through: the direct figures.
				}
				r := measureInformer(t, cp, bin, serverArgs, feed)
				t.Logf("%+v", r)
				res.informer = append(res.informer, r)
			}
		})
	}
	if *nodeViewFleetNodes > 0 {
		t.Run("fleet", func(t *testing.T) {
			nodes := make([]string, *nodeViewFleetNodes)
			for i := range nodes {
				nodes[i] = fmt.Sprintf("fleet-%03d", i)
			}
			views(t, &res.fleet, nodes, *nodeViewFleetPods, *nodeViewFleetRS, *nodeViewFleetM, *nodeViewFleetChurn)
		})
	}
}

// viewSeed is what seedViewCluster made.
type viewSeed struct {
	nodes []string
	// others are the ReplicaSets that own no pod of the nodes: those of
	// other nodes, which the churn changes.
	others []types.NamespacedName
}

// seedViewCluster makes the cluster: viewNamespaces namespaces, a Node
// for each of nodes, replicaSets ReplicaSets (at least one per
// podsPerOwner pods of the nodes; metadata-sized, each owned by a
// Deployment, as a Deployment's are; the Deployments of those that own
// the nodes' pods), written straight into etcd in batches, and
// podsPerNode pods on each node, created through the API server, each
// owned by one of those ReplicaSets.
func seedViewCluster(t *testing.T, cp *kubetest.ControlPlane, nodes []string, podsPerNode, replicaSets int) viewSeed {
	t.Helper()
	ctx := t.Context()
	start := time.Now()
	for i := range viewNamespaces {
		if _, err := cp.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: viewNamespace(i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		if _, err := cp.Admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"kubernetes.io/hostname": n}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ownersPerNode := (podsPerNode + podsPerOwner - 1) / podsPerOwner
	owners := ownersPerNode * len(nodes)
	replicaSets = max(replicaSets, owners)
	now := metav1.Now()
	kvs := make([][2][]byte, 0, replicaSets+owners)
	seed := viewSeed{nodes: nodes}
	rsOf := make([]*appsv1.ReplicaSet, owners)
	for i := range replicaSets {
		d := viewDeployment(i, now)
		rs := viewReplicaSet(d, now)
		kvs = append(kvs, [2][]byte{[]byte("/registry/replicasets/" + rs.Namespace + "/" + rs.Name), kubetest.StoredValue(t, rs, appsv1.SchemeGroupVersion)})
		if i < owners {
			rsOf[i] = rs
			kvs = append(kvs, [2][]byte{[]byte("/registry/deployments/" + d.Namespace + "/" + d.Name), kubetest.StoredValue(t, d, appsv1.SchemeGroupVersion)})
		} else {
			seed.others = append(seed.others, types.NamespacedName{Namespace: rs.Namespace, Name: rs.Name})
		}
	}
	cp.PutEtcd(t, kvs)
	// The API server's watch cache takes them from its watch of etcd: a
	// moment after they are written, on a busy machine.
	kubetest.Eventually(t, "the API server lists the ReplicaSets written to etcd", func() error {
		list, err := cp.Admin.AppsV1().ReplicaSets("").List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return err
		}
		if got := len(list.Items) + int(ptr.Deref(list.RemainingItemCount, 0)); got != replicaSets {
			return fmt.Errorf("it lists %d of %d", got, replicaSets)
		}
		return nil
	})
	var wg sync.WaitGroup
	jobs := make(chan int)
	for range churnWorkers {
		wg.Go(func() {
			for i := range jobs {
				node, j := i/podsPerNode, i%podsPerNode
				rs := rsOf[node*ownersPerNode+j/podsPerOwner]
				p := podstest.Pod(rs.Namespace, fmt.Sprintf("%s-%05d", rs.Name, j), i)
				p.UID, p.ResourceVersion, p.Status = "", "", corev1.PodStatus{}
				p.Spec.NodeName = nodes[node]
				p.Labels = rs.Spec.Selector.MatchLabels
				p.OwnerReferences = []metav1.OwnerReference{controllerRef(appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), rs.Name, rs.UID)}
				if _, err := cp.Admin.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					t.Errorf("pod %s/%s: %v", p.Namespace, p.Name, err)
				}
			}
		})
	}
	for i := range podsPerNode * len(nodes) {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("seeded %d nodes, %d ReplicaSets (%d owning the nodes' %d pods) in %v", len(nodes), replicaSets, owners, podsPerNode*len(nodes), time.Since(start).Round(time.Millisecond))
	return seed
}

func viewNamespace(i int) string { return fmt.Sprintf("app-%02d", i%viewNamespaces) }

// viewDeployment returns the i-th Deployment, as a Deployment of one
// container is stored.
func viewDeployment(i int, created metav1.Time) *appsv1.Deployment {
	name := fmt.Sprintf("web-%06d", i)
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: viewNamespace(i), UID: types.UID(fmt.Sprintf("00000000-0000-4000-9000-%012d", i)),
			CreationTimestamp: created, Generation: 1, Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(podsPerOwner)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: viewTemplate(labels)},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: podsPerOwner},
	}
}

// viewReplicaSet returns the ReplicaSet of d, as a Deployment's is
// stored: metadata-sized, with its pod-template-hash and owner.
func viewReplicaSet(d *appsv1.Deployment, created metav1.Time) *appsv1.ReplicaSet {
	const hash = "7d9f8b6c4"
	labels := map[string]string{"app": d.Name, "pod-template-hash": hash}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: d.Name + "-" + hash, Namespace: d.Namespace, UID: types.UID(strings.Replace(string(d.UID), "-9000-", "-8000-", 1)),
			CreationTimestamp: created, Generation: 1, Labels: labels,
			Annotations:     map[string]string{"deployment.kubernetes.io/revision": "1"},
			OwnerReferences: []metav1.OwnerReference{controllerRef(appsv1.SchemeGroupVersion.WithKind("Deployment"), d.Name, d.UID)}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(podsPerOwner)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: viewTemplate(labels)},
		Status: appsv1.ReplicaSetStatus{ObservedGeneration: 1, Replicas: podsPerOwner},
	}
}

func viewTemplate(labels map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1.0"}}}}
}

// controllerRef returns the reference of a controller of kind gvk.
func controllerRef(gvk schema.GroupVersionKind, name string, uid types.UID) metav1.OwnerReference {
	return *metav1.NewControllerRef(&metav1.ObjectMeta{Name: name, UID: uid}, gvk)
}

// label returns the value of m's label name.
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// viewScenario is what one measurement of the agents runs.
type viewScenario struct {
	feed    string
	nodes   []string
	perNode int                    // Agents per node.
	churn   []types.NamespacedName // The ReplicaSets the churn changes, in turn.
	rate    int                    // Changes per second, ...
	during  time.Duration          // ... for this long.
}

// measureView runs sc: the agents (and, in a view, a podsapi-server per
// node) from their start to their sync, then the churn, and measures it.
func measureView(t *testing.T, cp *kubetest.ControlPlane, bin string, serverArgs []string, sc viewScenario) viewResult {
	t.Helper()
	apiProxy := kubetest.NewProxy(t, cp.Host()) // The nodes' link to the API server.
	before := scrape(t, cp)
	cpu0 := apiserverCPU(t, cp)
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	stopAgents := func() {
		cancel()
		wg.Wait()
	}
	defer stopAgents()

	var servers []*podsapiServer
	var serving time.Duration
	agentProxies := []*kubetest.Proxy{apiProxy} // The agents' links, whatever they reach.
	cfgs := make([]*rest.Config, len(sc.nodes))
	switch sc.feed {
	case feedDirect:
		for i := range cfgs {
			cfgs[i] = cp.Config(kubetest.AdminUser, apiProxy.Addr())
		}
	case feedFullView, feedNodeView:
		servers = startPodsapiServers(t, bin, cp, apiProxy.Addr(), sc.nodes, serverArgs)
		serving = time.Since(start)
		agentProxies = agentProxies[:0]
		for i, s := range servers {
			p := kubetest.NewProxy(t, s.addr)
			agentProxies = append(agentProxies, p)
			host := "https://" + p.Addr()
			if sc.feed == feedNodeView {
				host += nodeViewPath
			}
			cfgs[i] = &rest.Config{Host: host, BearerToken: cp.Token(kubetest.AdminUser), TLSClientConfig: rest.TLSClientConfig{CAData: s.ca}, QPS: 100, Burst: 200}
		}
	default:
		t.Fatalf("unknown feed %q", sc.feed)
	}
	var agents []*viewAgent
	for i, node := range sc.nodes {
		for range sc.perNode {
			agents = append(agents, startViewAgent(t, ctx, &wg, cfgs[i], node))
		}
	}
	kubetest.Eventually(t, sc.feed+": the agents' informers synced", func() error {
		n := 0
		for _, a := range agents {
			if a.synced() {
				n++
			}
		}
		if n < len(agents) {
			return fmt.Errorf("%d of %d agents synced", n, len(agents))
		}
		return nil
	})
	r := viewResult{feed: sc.feed, nodes: len(sc.nodes), agents: len(agents), sync: time.Since(start), serving: serving}
	r.syncBytes = downBytes(apiProxy)
	agentBytes0 := downBytes(agentProxies...)

	r.updates = churnReplicaSets(t, cp.Admin, sc.churn, sc.rate, sc.during)
	if sc.feed != feedNodeView {
		// Their ReplicaSet informers receive every change: wait for the
		// last, so that the churn's bytes are all counted. The node
		// view's receive none.
		kubetest.Eventually(t, sc.feed+": every agent received every ReplicaSet change", func() error {
			for i, a := range agents {
				if got := a.rsEvents.Load(); got < int64(r.updates) {
					return fmt.Errorf("agent %d received %d of %d", i, got, r.updates)
				}
			}
			return nil
		})
	}
	r.churnBytes = downBytes(apiProxy) - r.syncBytes
	r.agentChurnBytes = downBytes(agentProxies...) - agentBytes0
	for _, a := range agents {
		r.rsEvents += a.rsEvents.Load()
	}
	during := scrape(t, cp)
	r.cpu = apiserverCPU(t, cp) - cpu0
	for _, s := range servers {
		rss, err := childproc.RSS(s.proc.PID())
		if err != nil {
			t.Fatal(err)
		}
		c, err := childproc.CPU(s.proc.PID())
		if err != nil {
			t.Fatal(err)
		}
		r.serverRSS += float64(rss)
		r.serverCPU += c.Seconds()
	}

	// A watch is counted in apiserver_request_total when it ends: stop
	// the agents and the servers, and wait until their watches are closed.
	stopAgents()
	stopPodsapiServers(t, servers)
	watches := map[string]string{"verb": "WATCH"}
	after := scrape(t, cp)
	kubetest.Eventually(t, sc.feed+": the watches ended", func() error {
		after = scrape(t, cp)
		if open, was := after.gauge("apiserver_longrunning_requests", watches), before.gauge("apiserver_longrunning_requests", watches); open > was {
			return fmt.Errorf("%v watches open, %v before", open, was)
		}
		return nil
	})
	r.watches = make(map[string]float64)
	during.each("apiserver_longrunning_requests", watches, func(m *dto.Metric) { r.watches[label(m, "resource")] += m.GetGauge().GetValue() })
	before.each("apiserver_longrunning_requests", watches, func(m *dto.Metric) { r.watches[label(m, "resource")] -= m.GetGauge().GetValue() })
	count := func(m apiMetrics, sign float64) {
		m.each("apiserver_request_total", nil, func(met *dto.Metric) {
			v := sign * met.GetCounter().GetValue()
			switch verb, res := label(met, "verb"), label(met, "resource"); {
			case res == "":
			case verb == "LIST" || verb == "WATCH":
				r.lists += v
			case verb == "GET":
				r.gets += v
			case verb == "POST" && (res == "tokenreviews" || res == "subjectaccessreviews"):
				r.reviews += v
			}
		})
	}
	count(after, 1)
	count(before, -1)
	return r
}

// downBytes returns the bytes proxies forwarded back to their clients,
// together.
func downBytes(proxies ...*kubetest.Proxy) float64 {
	var sum int64
	for _, p := range proxies {
		_, down := p.Bytes()
		sum += down
	}
	return float64(sum)
}

// churnSeq numbers the churn's changes of a run.
var churnSeq atomic.Int64

// churnReplicaSets changes the status of the ReplicaSets rs in turn, rate
// a second for d, with churnWorkers writers, and returns the changes made.
func churnReplicaSets(t *testing.T, c *kubernetes.Clientset, rs []types.NamespacedName, rate int, d time.Duration) int {
	t.Helper()
	n := int(float64(rate) * d.Seconds())
	if n <= 0 || len(rs) == 0 {
		return 0
	}
	jobs := make(chan int, n)
	var wg sync.WaitGroup
	for range churnWorkers {
		wg.Go(func() {
			for seq := range jobs {
				r := rs[seq%len(rs)]
				// Replicas the seeded status and no other change of the
				// run has: every change is one.
				patch := fmt.Sprintf(`{"status":{"replicas":%d}}`, 1000+churnSeq.Add(1))
				if _, err := c.AppsV1().ReplicaSets(r.Namespace).Patch(t.Context(), r.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
					t.Errorf("churn %s: %v", r, err)
				}
			}
		})
	}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	for seq := range n {
		<-tick.C
		jobs <- seq
	}
	tick.Stop()
	close(jobs)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return n
}

// measureInformer measures the metadata-only ReplicaSet informer of feed
// (direct or the node view).
func measureInformer(t *testing.T, cp *kubetest.ControlPlane, bin string, serverArgs []string, feed string) informerResult {
	t.Helper()
	apiProxy := kubetest.NewProxy(t, cp.Host())
	cfg := cp.Config(kubetest.AdminUser, apiProxy.Addr())
	var server *podsapiServer
	if feed == feedNodeView {
		server = startPodsapiServers(t, bin, cp, apiProxy.Addr(), []string{viewNode}, serverArgs)[0]
		p := kubetest.NewProxy(t, server.addr)
		cfg = &rest.Config{Host: "https://" + p.Addr() + nodeViewPath, BearerToken: cp.Token(kubetest.AdminUser), TLSClientConfig: rest.TLSClientConfig{CAData: server.ca}, QPS: 100, Burst: 200}
	}
	r := informerResult{feed: feed}
	r.objects, r.sync, r.heap = metadataInformerHeap(t, cfg)
	r.bytes = downBytes(apiProxy)
	if server != nil {
		rss, err := childproc.RSS(server.proc.PID())
		if err != nil {
			t.Fatal(err)
		}
		r.serverRSS = rss
		server.stop(t)
	}
	return r
}

// nodeViewMarkdown writes the figures of res, with their ratios to the
// direct feed's of the same measurement.
func nodeViewMarkdown(res nodeViewResults) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "## The node's view: the agents that describe a node's pods, directly and through the views (issue 46)\n\n")
	fmt.Fprintf(&sb, "Written by `make bench-nodeview` (test/bench/nodeview_test.go) on %s in %v; a shared 2-core machine: read the ratios.\n",
		res.start.UTC().Format("2006-01-02 15:04 UTC"), time.Since(res.start).Round(time.Second))
	fmt.Fprintf(&sb, nodeViewIntro, "`"+*nodeViewServerArgs+"`")
	if len(res.oneNode) > 0 {
		r0 := res.oneNode[0]
		fmt.Fprintf(&sb, "\n### One node, %d agents\n\n%d pods on the node (%d per ReplicaSet), %d ReplicaSets in %d namespaces, then %d status changes of ReplicaSets of other nodes at %d/s.\n\n",
			r0.agents, *nodeViewPods, podsPerOwner, max(*nodeViewRS, (*nodeViewPods+podsPerOwner-1)/podsPerOwner), viewNamespaces, r0.updates, *nodeViewChurn)
		viewTable(&sb, res.oneNode)
		sb.WriteString("\n#### ReplicaSet churn on other nodes: the bytes that reach the node\n\n")
		sb.WriteString("| feed | changes | ReplicaSet events received by the agents | bytes from the API server to the node | per change | bytes to the agents' connections | per agent |\n|---|---:|---:|---:|---:|---:|---:|\n")
		for _, r := range res.oneNode {
			fmt.Fprintf(&sb, "| %s | %d | %d | %s | %s | %s | %s |\n", r.feed, r.updates, r.rsEvents, fmtBytes(r.churnBytes),
				fmtBytes(r.churnBytes/float64(max(r.updates, 1))), fmtBytes(r.agentChurnBytes), fmtBytes(r.agentChurnBytes/float64(max(r.agents, 1))))
		}
		ratioTable(&sb, res.oneNode, ratioCol{"bytes to the node ÷", func(r viewResult) float64 { return r.churnBytes }},
			ratioCol{"to the agents ÷", func(r viewResult) float64 { return r.agentChurnBytes }})
	}
	if len(res.informer) > 0 {
		fmt.Fprintf(&sb, "\n### A metadata-only ReplicaSet informer in a cluster of %d ReplicaSets\n\n%d pods on the node. The informer is client-go's metadatainformer of ReplicaSets, unchanged (PartialObjectMetadata, protobuf); its heap is the test process's live heap after a collection with the informer synced, less that once it has stopped and nothing refers to it (a moment later).\n\n",
			*nodeViewBigRS, *nodeViewPods)
		sb.WriteString("| feed | ReplicaSets held | time to sync | heap held | bytes from the API server to the node | podsapi-server RSS |\n|---|---:|---:|---:|---:|---:|\n")
		var direct informerResult
		for _, r := range res.informer {
			if r.feed == feedDirect {
				direct = r
			}
			rss := ""
			if r.serverRSS > 0 {
				rss = fmtBytes(float64(r.serverRSS))
			}
			fmt.Fprintf(&sb, "| %s | %d | %v | %s | %s | %s |\n", r.feed, r.objects, r.sync.Round(time.Millisecond), fmtBytes(float64(r.heap)), fmtBytes(r.bytes), rss)
		}
		for _, r := range res.informer {
			if r.feed != feedDirect && direct.feed != "" {
				fmt.Fprintf(&sb, "\n%s ÷ direct: objects %s, heap %s, bytes %s, time to sync %s.\n", r.feed, over(float64(r.objects), float64(direct.objects)),
					over(float64(r.heap), float64(direct.heap)), over(r.bytes, direct.bytes), over(float64(r.sync), float64(direct.sync)))
			}
		}
	}
	if len(res.fleet) > 0 {
		r0 := res.fleet[0]
		fmt.Fprintf(&sb, "\n### The fleet: %d nodes × %d agents\n\nAs kubemark simulates nodes, on this machine: %d pods on each node, %d ReplicaSets, then %d ReplicaSet changes at %d/s; in the views, a podsapi-server per node.\n\n",
			r0.nodes, r0.agents/max(r0.nodes, 1), *nodeViewFleetPods, max(*nodeViewFleetRS, r0.nodes*((*nodeViewFleetPods+podsPerOwner-1)/podsPerOwner)), r0.updates, *nodeViewFleetChurn)
		viewTable(&sb, res.fleet)
	}
	return sb.String()
}

const nodeViewIntro = `
A real kube-apiserver v1.37.2 on etcd (loopback; test/kubetest) and the real podsapi-server of this tree
(--source=apiserver, its front door on loopback TLS, and %s). Each agent is
k8sattributes-like: the client-go informers OpenTelemetry's k8sattributes runs for pod, namespace, node and
deployment attributes (the node's pods by spec.nodeName, every namespace, every ReplicaSet transformed to its
metadata, the node by metadata.name), on one client with its own connection and client-go's defaults (JSON).
The agents read the API server (**direct**), the door's URL (**full view**: pods, namespaces and the node
answered by podsapi, ReplicaSets passed through) or the door's URL + ` + "`/views/node`" + ` (**node view**: the
node's slice). The ReplicaSets are written straight into etcd in transactions of 128 (kubetest.PutEtcd), the
pods created through the API server. Measured at the API server: the watches open at the end
(` + "`apiserver_longrunning_requests`" + `, by resource), the LIST and WATCH requests of any resource (an
informer's first list is a watch: client-go's watch-list), the GETs (podsapi's one get per owner of the node's
pods, a ReplicaSet and its Deployment, with --workloads=apiserver) and the TokenReviews and SubjectAccessReviews
of the door (` + "`apiserver_request_total`" + `), its CPU (/proc, the churn's writes included, the same in
every feed); and on the wire (TLS included, kubetest.Proxy): the bytes the API server sent the node (every
client of the node reaches it through one proxy: the direct agents, or podsapi-server) and those that reached
the agents' connections, as sent: an informer's watch is gzip-compressed, its initial events in bulk and each
later event alone, as client-go and kube-apiserver agree by default (WatchListCompression). A feed's figures include its podsapi-servers' start, and its time to sync counts from
it (to their health's SERVING: the node's pods synced); the node view answers a kind 503 with Retry-After until
podsapi holds the node's slice of it, which takes its owners' gets at the workload resolver's client rate (5/s,
a burst of 10), so that its agents sync later. Reproduce with:

` + "```sh" + `
make bench-nodeview    # builds kube-apiserver and etcd once (make kube-bin), then runs every measurement
make bench-nodeview BENCH_NODEVIEW_ARGS='-nodeview-big-replicasets 5000 -nodeview-fleet-nodes 10'    # smaller
` + "```" + `
`

// viewTable writes the figures of results and their ratios to the direct
// feed's.
func viewTable(sb *strings.Builder, results []viewResult) {
	kinds := []string{"pods", "namespaces", "replicasets", "nodes"}
	sb.WriteString("| feed | agents | watches: pods | namespaces | replicasets | nodes | all | LIST+WATCH | GET | reviews | bytes from the API server: to sync | during the churn | API server CPU | time to sync | of which podsapi-servers' start | podsapi-servers' RSS | CPU |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range results {
		fmt.Fprintf(sb, "| %s | %d |", r.feed, r.agents)
		for _, k := range kinds {
			fmt.Fprintf(sb, " %.0f |", r.watches[k])
		}
		serving, rss, cpu := "", "", ""
		if r.serverRSS > 0 {
			serving, rss, cpu = r.serving.Round(10*time.Millisecond).String(), fmtBytes(r.serverRSS), fmt.Sprintf("%.2f s", r.serverCPU)
		}
		fmt.Fprintf(sb, " %.0f | %.0f | %.0f | %.0f | %s | %s | %.2f s | %v | %s | %s | %s |\n", r.allWatches(), r.lists, r.gets, r.reviews, fmtBytes(r.syncBytes), fmtBytes(r.churnBytes),
			r.cpu, r.sync.Round(10*time.Millisecond), serving, rss, cpu)
	}
	ratioTable(sb, results, ratioCol{"watches ÷", viewResult.allWatches},
		ratioCol{"LIST+WATCH ÷", func(r viewResult) float64 { return r.lists }},
		ratioCol{"bytes ÷", func(r viewResult) float64 { return r.syncBytes + r.churnBytes }},
		ratioCol{"API server CPU ÷", func(r viewResult) float64 { return r.cpu }})
}

// allWatches returns r's watches of every resource.
func (r viewResult) allWatches() float64 {
	var all float64
	for _, v := range r.watches {
		all += v
	}
	return all
}

// ratioCol is a column of a ratio table: its name and its figure.
type ratioCol struct {
	name string
	of   func(viewResult) float64
}

// ratioTable writes, for each feed of results but direct, the figures of
// cols divided by direct's.
func ratioTable(sb *strings.Builder, results []viewResult, cols ...ratioCol) {
	i := slices.IndexFunc(results, func(r viewResult) bool { return r.feed == feedDirect })
	if i < 0 || len(results) < 2 {
		return
	}
	direct := results[i]
	sb.WriteString("\n| feed ÷ direct |")
	for _, c := range cols {
		fmt.Fprintf(sb, " %s |", c.name)
	}
	sb.WriteString("\n|---|" + strings.Repeat("---:|", len(cols)) + "\n")
	for _, r := range results {
		if r.feed == feedDirect {
			continue
		}
		fmt.Fprintf(sb, "| %s |", r.feed)
		for _, c := range cols {
			fmt.Fprintf(sb, " %s |", over(c.of(r), c.of(direct)))
		}
		sb.WriteString("\n")
	}
}

// over returns a ÷ b to three significant digits, or a dash when b is 0.
func over(a, b float64) string {
	if b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.3g", a/b)
}
