package workload_test

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/podsapi/podsapi/test/kubetest"
	"github.com/podsapi/podsapi/workload"
)

// apiserverMetrics reads, from the API server's own metrics, the samples
// of apiserver_request_total, apiserver_response_sizes_sum,
// apiserver_watch_events_total and apiserver_watch_events_sizes_sum, summed
// by name, verb and resource ("apiserver_request_total GET replicasets"; the
// watch events have no verb: "apiserver_watch_events_total  replicasets").
func apiserverMetrics(t *testing.T, admin kubernetes.Interface) map[string]float64 {
	t.Helper()
	raw, err := admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, "{")
		if !ok {
			continue
		}
		switch name {
		case "apiserver_request_total", "apiserver_response_sizes_sum", "apiserver_watch_events_total", "apiserver_watch_events_sizes_sum":
		default:
			continue
		}
		labels := rest[:strings.LastIndexByte(rest, '}')]
		var verb, resource string
		for _, kv := range strings.Split(labels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "verb":
				verb = strings.Trim(v, `"`)
			case "resource":
				resource = strings.Trim(v, `"`)
			}
		}
		n, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		counts[name+" "+verb+" "+resource] += n
	}
	return counts
}

// TestRequestsAPIServer measures what the Resolver asks of a real
// kube-apiserver for a node of 110 pods over an hour of churn, compressed
// (the Resolver's clock advances 5 minutes per round, 12 rounds), against a
// ReplicaSet informer configured as OpenTelemetry's k8sattributes configures
// its own (a cluster-wide list and watch of ReplicaSets, with a transform
// keeping the metadata) in the same run. The cluster has 2,000 ReplicaSets
// on other nodes, 100 of which roll out per round. docs/benchmarks.md
// ("Workloads") has the figures; run with -v to print them.
//
// The node: 20 Deployments of 3 pods (through their ReplicaSets), 10
// StatefulSet pods, 10 DaemonSet pods, 10 CronJob pods (through their
// Jobs), 10 bare Jobs' pods, 5 static pods and 5 pods without a controller.
// Per round 2 Deployments roll out (a new ReplicaSet, 3 new pods replace the
// old) and 2 CronJobs run again (a new Job and pod replace the old).
func TestRequestsAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 2,000 ReplicaSets")
	}
	cp := kubetest.Start(t, resolverUser)
	grantGets(t, cp.Admin)
	waitGrant(t, cp)
	ctx := t.Context()
	w := newWorld(t, cp, "node")
	elsewhere := newWorld(t, cp, "cluster")
	const (
		clusterRS   = 2000
		rolloutsOut = 100 // ReplicaSets created elsewhere per round
		rounds      = 12
		round       = 5 * time.Minute
	)
	for i := range clusterRS {
		elsewhere.replicaSet(fmt.Sprintf("other-%d-%08d", i, i), fmt.Sprintf("%08d", i), nil)
	}

	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	r := newResolver(t, cp, clk)

	// The emulated k8sattributes: its ReplicaSet informer, cluster-wide.
	var events atomic.Int64
	factory := informers.NewSharedInformerFactoryWithOptions(kubernetes.NewForConfigOrDie(cp.AdminConfig), 0,
		informers.WithTransform(func(obj any) (any, error) {
			if rs, ok := obj.(*appsv1.ReplicaSet); ok {
				return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: rs.Name, Namespace: rs.Namespace, UID: rs.UID, OwnerReferences: rs.OwnerReferences}}, nil
			}
			return obj, nil
		}))
	rsInformer := factory.Apps().V1().ReplicaSets().Informer()
	if _, err := rsInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { events.Add(1) },
		UpdateFunc: func(any, any) { events.Add(1) },
		DeleteFunc: func(any) { events.Add(1) },
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); factory.Shutdown() })

	before := apiserverMetrics(t, cp.Admin)
	factory.Start(stop)
	if !cache.WaitForCacheSync(ctx.Done(), rsInformer.HasSynced) {
		t.Fatal("the ReplicaSet informer did not sync")
	}

	podN := 0
	newPod := func(labels, annotations map[string]string, owners []metav1.OwnerReference) *corev1.Pod {
		podN++
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: fmt.Sprintf("p-%d", podN), UID: types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", podN)),
			Labels: labels, Annotations: annotations, OwnerReferences: owners}, Spec: corev1.PodSpec{NodeName: w.node}}
		r.Observe(p)
		return p
	}
	// The node's pods, by the owner they are replaced with.
	deployments := make([][]*corev1.Pod, 20)
	rollout := func(d, generation int) {
		for _, p := range deployments[d] {
			r.Forget(p.UID)
		}
		hash := fmt.Sprintf("%04d%04d", d, generation)
		dep := fmt.Sprintf("web%d", d)
		rs := w.replicaSet(dep+"-"+hash, hash, controller("apps/v1", "Deployment", dep, types.UID(fmt.Sprintf("dep-%d", d))))
		deployments[d] = nil
		for range 3 {
			deployments[d] = append(deployments[d], newPod(map[string]string{"pod-template-hash": hash}, nil, controller("apps/v1", "ReplicaSet", rs.Name, rs.UID)))
		}
	}
	crons := make([]*corev1.Pod, 10)
	run := func(c int, minute int) {
		if crons[c] != nil {
			r.Forget(crons[c].UID)
		}
		cron := fmt.Sprintf("report%d", c)
		job := w.job(fmt.Sprintf("%s-%d", cron, 29_000_000+minute), controller("batch/v1", "CronJob", cron, types.UID(fmt.Sprintf("cron-%d", c))))
		crons[c] = newPod(nil, nil, controller("batch/v1", "Job", job.Name, job.UID))
	}
	for d := range deployments {
		rollout(d, 0)
	}
	for c := range crons {
		run(c, 0)
	}
	for i := range 10 {
		newPod(nil, nil, controller("apps/v1", "StatefulSet", "db", "sts"))
		newPod(nil, nil, controller("apps/v1", "DaemonSet", fmt.Sprintf("agent%d", i), "ds"))
		job := w.job(fmt.Sprintf("migrate%d", i), nil)
		newPod(nil, nil, controller("batch/v1", "Job", job.Name, job.UID))
	}
	for i := range 5 {
		newPod(nil, map[string]string{"kubernetes.io/config.mirror": "x"}, controller("v1", "Node", w.node, "node"))
		newPod(nil, nil, nil)
		_ = i
	}
	r.Sync(ctx)
	start := r.Gets()

	for i := 1; i <= rounds; i++ {
		clk.Advance(round)
		rollout((2*i)%20, i)
		rollout((2*i+1)%20, i)
		run((2*i)%10, i*5)
		run((2*i+1)%10, i*5)
		for j := range rolloutsOut {
			n := (i*rolloutsOut + j) % clusterRS
			elsewhere.replicaSet(fmt.Sprintf("other-%d-r%d", n, i), fmt.Sprintf("r%d", i), nil)
		}
		r.Sync(ctx)
	}
	// Every ReplicaSet created is in the informer's cache: its events
	// are all received.
	total := clusterRS + rounds*rolloutsOut + 20 + rounds*2
	deadline := time.Now().Add(60 * time.Second)
	for len(rsInformer.GetStore().ListKeys()) < total && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	after := apiserverMetrics(t, cp.Admin)
	gets := r.Gets()
	delta := func(key string) float64 { return after[key] - before[key] }
	requests := func(verb, resource string) float64 { return delta("apiserver_request_total " + verb + " " + resource) }

	// The API server counted exactly the Resolver's gets (the test itself
	// gets nothing after the baseline).
	if got, want := requests("GET", "replicasets"), float64(gets[workload.KindReplicaSet]); got != want {
		t.Errorf("API server GET replicasets = %v, Resolver's = %v", got, want)
	}
	if got, want := requests("GET", "jobs"), float64(gets[workload.KindJob]); got != want {
		t.Errorf("API server GET jobs = %v, Resolver's = %v", got, want)
	}
	// Its gets grow with the node's new owners: 20 ReplicaSets and 20 Jobs
	// at start, 2 and 2 per round, and the refreshes of the owners still
	// referenced at minutes 30 and 60.
	if n := gets[workload.KindReplicaSet] + gets[workload.KindJob]; n > 40+4*rounds+2*40 {
		t.Errorf("Resolver sent %d gets, more than %d", n, 40+4*rounds+2*40)
	}
	t.Logf("node: 110 pods, %d rounds of %v (an hour), per round 2 rollouts and 2 CronJob runs; cluster: %d ReplicaSets, %d more per round", rounds, round, clusterRS, rolloutsOut)
	t.Logf("Resolver: GET replicasets %v, GET jobs %v (at start: %v and %v), LIST/WATCH none; owners held at the end: %d ReplicaSets and Jobs",
		requests("GET", "replicasets"), requests("GET", "jobs"), start[workload.KindReplicaSet], start[workload.KindJob], 20+10+10)
	t.Logf("Resolver: bytes of its gets' answers %v (replicasets) and %v (jobs)",
		delta("apiserver_response_sizes_sum GET replicasets"), delta("apiserver_response_sizes_sum GET jobs"))
	t.Logf("ReplicaSet informer (k8sattributes): LIST replicasets %v, WATCH replicasets %v (a watch is counted when it ends), watch events sent %v (%v bytes), events received %d, ReplicaSets held %d",
		requests("LIST", "replicasets"), requests("WATCH", "replicasets"),
		delta("apiserver_watch_events_total  replicasets"), delta("apiserver_watch_events_sizes_sum  replicasets"),
		events.Load(), len(rsInformer.GetStore().ListKeys()))
}
