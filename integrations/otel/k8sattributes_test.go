package otel_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/processor/k8sattributesprocessor"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/podsapi/podsapi/integrations/harness"
	"github.com/podsapi/podsapi/test/kubetest"
)

const (
	node      = "node-a"
	otherNode = "node-b"
	ns        = "shop"
	// waitTimeout bounds the wait for the processor's informers to see a
	// change (well under a second on an idle machine).
	waitTimeout = 60 * time.Second
)

// config is the processor's configuration as a user writes it in the
// collector's YAML (processors: k8s_attributes: ...), with %s the
// kubeconfig's context: "direct" (the API server), "podsapi" (the door's
// full view) or "node" (its node view). It asks for every workload
// attribute (Deployment, ReplicaSet, StatefulSet, DaemonSet, Job and
// CronJob names and UIDs), a label of each workload, a label and an
// annotation of the namespace and a label of the node, which make it watch
// (metadata only) ReplicaSets, Deployments, StatefulSets, DaemonSets, Jobs,
// CronJobs, Namespaces and its Node besides the node's pods.
const config = `
auth_type: kubeConfig
context: %s
filter:
  node: ` + node + `
extract:
  metadata:
  - k8s.pod.name
  - k8s.namespace.name
  - k8s.pod.uid
  - k8s.pod.start_time
  - k8s.node.name
  - k8s.deployment.name
  - k8s.deployment.uid
  - k8s.replicaset.name
  - k8s.replicaset.uid
  - k8s.statefulset.name
  - k8s.statefulset.uid
  - k8s.daemonset.name
  - k8s.daemonset.uid
  - k8s.job.name
  - k8s.job.uid
  - k8s.cronjob.name
  - k8s.cronjob.uid
  labels:
  - {tag_name: team, key: team, from: namespace}
  - {tag_name: zone, key: topology.kubernetes.io/zone, from: node}
  - {tag_name: deployment.tier, key: tier, from: deployment}
  - {tag_name: replicaset.tier, key: tier, from: replicaset}
  - {tag_name: statefulset.tier, key: tier, from: statefulset}
  - {tag_name: daemonset.tier, key: tier, from: daemonset}
  - {tag_name: job.tier, key: tier, from: job}
  - {tag_name: cronjob.tier, key: tier, from: cronjob}
  annotations:
  - {tag_name: owner, key: example.com/owner, from: namespace}
pod_association:
- sources:
  - from: resource_attribute
    name: k8s.pod.ip
- sources:
  - from: connection
`

// The ways the test runs the processor, each as its own ServiceAccount
// (so that the API server's audit log tells their requests apart) from a
// kubeconfig whose context is the way's.
var ways = []struct{ name, context, label string }{
	{"direct", harness.ContextDirect, "directly"},
	{"full", harness.ContextPodsapi, "through podsapi's full view (the door's URL)"},
	{"node", harness.ContextNodeView, "through podsapi's node view (the door's URL + /views/node)"},
}

// The kinds the processor watches with this config, besides pods.
var (
	describingKinds = []string{"namespaces", "nodes"}
	ownerKinds      = []string{"replicasets", "deployments", "statefulsets", "daemonsets", "jobs", "cronjobs"}
)

// TestK8sAttributes runs the processor directly against the API server,
// through podsapi's full view and through its node view at once, and
// checks that a span of each of the node's pods (of a Deployment, a
// StatefulSet, a DaemonSet and a CronJob's Job) gets the same attributes
// every way, those the objects say; that a pod created later is found
// every way; that a pod of another node is enriched by none; and what each
// run asked the API server: through the full view, nothing of pods,
// namespaces or the node (the door answers them), and through the node
// view nothing at all.
func TestK8sAttributes(t *testing.T) {
	cluster := harness.StartCluster(t)
	// The ClusterRole of the processor's README.
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "namespaces", "nodes"}, Verbs: []string{"get", "watch", "list"}},
		{APIGroups: []string{"apps"}, Resources: []string{"replicasets", "deployments", "statefulsets", "daemonsets"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs", "cronjobs"}, Verbs: []string{"get", "list", "watch"}},
	}
	agents := map[string]*harness.Agent{}
	for _, w := range ways {
		agents[w.name] = cluster.Agent(t, "otel", w.name, rules...)
	}
	admin := cluster.Admin
	ctx := t.Context()
	nodeObj, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: node, Labels: map[string]string{"topology.kubernetes.io/zone": "zone-a"},
	}}, metav1.CreateOptions{})
	must(t, err)
	must(t, create(ctx, admin, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns, Labels: map[string]string{"team": "checkout"}, Annotations: map[string]string{"example.com/owner": "payments"},
	}}))
	w := newWorkloads(t, admin)
	web := newPod(t, admin, w.rs, "web-5d4f8c7b9-abcde", node, "10.244.1.5")
	db := newPod(t, admin, w.sts, "db-0", node, "10.244.1.6")
	agentPod := newPod(t, admin, w.ds, "agent-x7k2p", node, "10.244.1.7")
	backup := newPod(t, admin, w.job, "backup-29000000-q8z4n", node, "10.244.1.8")
	away := newPod(t, admin, w.rs, "web-5d4f8c7b9-fghij", otherNode, "10.244.2.7")

	pa := cluster.StartPodsapi(t, node, harness.WithNodeView())
	// The node view holds the owners of the node's pods once podsapi has
	// got them; the processor lists its owners' informers before its pods'
	// and reads a pod's owners when the pod arrives, so it starts once the
	// node view holds them, as it would on a node whose podsapi runs.
	awaitOwners(t, agents["node"].NodeViewConfig(pa), w)
	runs := map[string]*run{}
	for _, way := range ways {
		// Each agent's kubeconfig names every context; each run uses its
		// own agent's, so that the runs' requests are told apart.
		t.Setenv("KUBECONFIG", agents[way.name].Kubeconfig(t, pa, way.context))
		runs[way.name] = startProcessor(t, way.context)
	}

	common := func(p *corev1.Pod) map[string]string {
		return map[string]string{
			"k8s.pod.ip":         p.Status.PodIP,
			"k8s.pod.name":       p.Name,
			"k8s.namespace.name": ns,
			"k8s.pod.uid":        string(p.UID),
			"k8s.pod.start_time": startTime(t, p),
			"k8s.node.name":      node,
			"k8s.node.uid":       string(nodeObj.UID), // Added whenever the processor watches its Node.
			"team":               "checkout",
			"owner":              "payments",
			"zone":               "zone-a",
		}
	}
	withAttrs := func(m map[string]string, kv ...string) map[string]string {
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	ofDeployment := func(p *corev1.Pod) map[string]string {
		return withAttrs(common(p),
			"k8s.deployment.name", w.deploy.Name, "k8s.deployment.uid", string(w.deploy.UID), "deployment.tier", "frontend",
			"k8s.replicaset.name", w.rs.Name, "k8s.replicaset.uid", string(w.rs.UID), "replicaset.tier", "frontend-rs")
	}
	pods := []struct {
		kind string
		pod  *corev1.Pod
		want map[string]string
	}{
		{"Deployment", web, ofDeployment(web)},
		{"StatefulSet", db, withAttrs(common(db),
			"k8s.statefulset.name", w.sts.Name, "k8s.statefulset.uid", string(w.sts.UID), "statefulset.tier", "data")},
		{"DaemonSet", agentPod, withAttrs(common(agentPod),
			"k8s.daemonset.name", w.ds.Name, "k8s.daemonset.uid", string(w.ds.UID), "daemonset.tier", "infra")},
		{"CronJob", backup, withAttrs(common(backup),
			"k8s.job.name", w.job.Name, "k8s.job.uid", string(w.job.UID), "job.tier", "batch",
			"k8s.cronjob.name", w.cron.Name, "k8s.cronjob.uid", string(w.cron.UID), "cronjob.tier", "ops")},
	}
	for _, p := range pods {
		t.Run("a span of a pod of a "+p.kind, func(t *testing.T) {
			sameEveryWay(t, runs, p.pod.Status.PodIP, p.want)
		})
	}
	t.Run("a pod created later", func(t *testing.T) {
		later := newPod(t, admin, w.rs, "web-5d4f8c7b9-klmno", node, "10.244.1.9")
		sameEveryWay(t, runs, "10.244.1.9", ofDeployment(later))
	})
	t.Run("a pod of another node", func(t *testing.T) {
		// Every run has seen every change made before the later pod, so a
		// pod made before it is known to all, or to none: filter.node.
		only := map[string]string{"k8s.pod.ip": away.Status.PodIP}
		for _, way := range ways {
			if got := runs[way.name].enrich(t, away.Status.PodIP); !maps.Equal(got, only) {
				t.Errorf("%s: %v, want %v", way.label, got, only)
			}
		}
	})

	t.Run("what each asked the API server", func(t *testing.T) {
		asked := map[string]harness.Tally{}
		for _, way := range ways {
			asked[way.name] = cluster.Asked(t, agents[way.name].User())
			t.Logf("%s, the processor asked the API server: %v", way.label, asked[way.name])
			harness.Record(t, "OpenTelemetry k8sattributes v1.3.1, every workload, namespace and node attribute", way.label,
				"the collector's requests at the API server: "+asked[way.name].String())
		}
		own := cluster.Asked(t, harness.PodsapiUser)
		t.Logf("podsapi itself asked the API server: %v", own)
		d, full, nodeView := asked["direct"], asked["full"], asked["node"]
		// client-go v0.37's informers list with a streaming watch
		// (sendInitialEvents=true): one watch, no list.
		for _, res := range append(append([]string{"pods"}, describingKinds...), ownerKinds...) {
			if d["watch "+res] == 0 {
				t.Errorf("directly: no watch of %s at the API server: %v", res, d)
			}
		}
		for _, res := range append([]string{"pods"}, describingKinds...) {
			if n := full["watch "+res] + full["list "+res] + full["get "+res]; n != 0 {
				t.Errorf("through the full view: %d requests for %s reached the API server: %v", n, res, full)
			}
		}
		for _, res := range ownerKinds {
			if full["watch "+res] == 0 {
				t.Errorf("through the full view: the processor's watch of %s was not passed through: %v", res, full)
			}
		}
		if len(nodeView) != 0 {
			t.Errorf("through the node view: the collector's requests reached the API server, want none: %v", nodeView)
		}
		for res, want := range map[string]int{"pods": 1, "namespaces": 1, "nodes": 1} {
			if n := own["watch "+res]; n != want {
				t.Errorf("podsapi's own watches of %s: %d, want %d: %v", res, n, want, own)
			}
		}
		for _, res := range ownerKinds {
			if n := own["watch "+res] + own["list "+res]; n != 0 {
				t.Errorf("podsapi listed or watched %s %d times, want only gets: %v", res, n, own)
			}
		}
	})
	counts := pa.Door(t)
	t.Logf("door: %v local and %v proxied requests answered, %v local and %v proxied open (watches)",
		counts.Route("local"), counts.Route("proxied"), counts.InFlight["local"], counts.InFlight["proxied"])
}

// sameEveryWay sends spans of ip to every run until each adds want's
// attributes, and fails unless every run ends with the same.
func sameEveryWay(t *testing.T, runs map[string]*run, ip string, want map[string]string) {
	t.Helper()
	got := map[string]map[string]string{}
	for _, way := range ways {
		got[way.name] = runs[way.name].waitFor(t, ip, want)
	}
	for _, way := range ways[1:] {
		if !maps.Equal(got["direct"], got[way.name]) {
			t.Fatalf("directly %v, %s %v", got["direct"], way.label, got[way.name])
		}
	}
}

// run is one k8sattributes processor built through its factory, with the
// sink its output goes to.
type run struct {
	name string
	proc processor.Traces
	sink *consumertest.TracesSink
}

// startProcessor builds the processor from config for context kctx as the
// collector does (factory, default config, YAML unmarshalled over it,
// CreateTraces, Start), and shuts it down at the end of the test.
func startProcessor(t *testing.T, kctx string) *run {
	t.Helper()
	factory := k8sattributesprocessor.NewFactory()
	cfg := factory.CreateDefaultConfig()
	var raw map[string]any
	must(t, yaml.Unmarshal(fmt.Appendf(nil, config, kctx), &raw))
	must(t, confmap.NewFromStringMap(raw).Unmarshal(cfg))
	must(t, cfg.(interface{ Validate() error }).Validate())
	sink := new(consumertest.TracesSink)
	proc, err := factory.CreateTraces(t.Context(), processortest.NewNopSettings(factory.Type()), cfg, sink)
	must(t, err)
	must(t, proc.Start(t.Context(), componenttest.NewNopHost()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := proc.Shutdown(ctx); err != nil {
			t.Errorf("%s: shutdown: %v", kctx, err)
		}
	})
	return &run{name: kctx, proc: proc, sink: sink}
}

// enrich sends the processor a span whose resource has k8s.pod.ip ip and
// returns the resource's attributes as the processor passed it on.
func (r *run) enrich(t *testing.T, ip string) map[string]string {
	t.Helper()
	traces := ptrace.NewTraces()
	rs := traces.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("k8s.pod.ip", ip)
	rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("checkout")
	r.sink.Reset()
	must(t, r.proc.ConsumeTraces(t.Context(), traces))
	all := r.sink.AllTraces()
	if len(all) != 1 || all[0].ResourceSpans().Len() != 1 {
		t.Fatalf("%s: %d batches out for one in", r.name, len(all))
	}
	got := make(map[string]string)
	for k, v := range all[0].ResourceSpans().At(0).Resource().Attributes().All() {
		got[k] = v.AsString()
	}
	return got
}

// waitFor sends spans of ip until the processor adds want's attributes
// (its informers see a change after the API server or podsapi sends it),
// and returns the last attributes.
func (r *run) waitFor(t *testing.T, ip string, want map[string]string) map[string]string {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		got := r.enrich(t, ip)
		if maps.Equal(got, want) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: span of %s has %v after %v, want %v", r.name, ip, got, waitTimeout, want)
		}
		<-tick.C
	}
}

// workloads are the owners of the test's pods, as their controllers would
// have made them (there is no controller manager in the test's control
// plane: the test makes every object), each labelled tier=...: a
// Deployment and its ReplicaSet, a StatefulSet, a DaemonSet, and a CronJob
// and its Job.
type workloads struct {
	deploy *appsv1.Deployment
	rs     *appsv1.ReplicaSet
	sts    *appsv1.StatefulSet
	ds     *appsv1.DaemonSet
	cron   *batchv1.CronJob
	job    *batchv1.Job
}

func newWorkloads(t *testing.T, c kubernetes.Interface) workloads {
	t.Helper()
	ctx := t.Context()
	meta := func(name, tier string, owners ...metav1.OwnerReference) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Labels: map[string]string{"tier": tier}, OwnerReferences: owners}
	}
	selector := func(app string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	}
	template := func(app string, restart corev1.RestartPolicy) corev1.PodTemplateSpec {
		spec := podSpec("")
		spec.RestartPolicy = restart
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}}, Spec: spec}
	}
	var (
		w   workloads
		err error
	)
	w.deploy, err = c.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: meta("web", "frontend"),
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: selector("web"), Template: template("web", "")},
	}, metav1.CreateOptions{})
	must(t, err)
	w.rs, err = c.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: meta("web-5d4f8c7b9", "frontend-rs", controller("apps/v1", "Deployment", w.deploy)),
		Spec:       appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](2), Selector: selector("web"), Template: template("web", "")},
	}, metav1.CreateOptions{})
	must(t, err)
	w.sts, err = c.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: meta("db", "data"),
		Spec:       appsv1.StatefulSetSpec{ServiceName: "db", Replicas: ptr.To[int32](1), Selector: selector("db"), Template: template("db", "")},
	}, metav1.CreateOptions{})
	must(t, err)
	w.ds, err = c.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: meta("agent", "infra"),
		Spec:       appsv1.DaemonSetSpec{Selector: selector("agent"), Template: template("agent", "")},
	}, metav1.CreateOptions{})
	must(t, err)
	w.cron, err = c.BatchV1().CronJobs(ns).Create(ctx, &batchv1.CronJob{
		ObjectMeta: meta("backup", "ops"),
		Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *", JobTemplate: batchv1.JobTemplateSpec{
			Spec: batchv1.JobSpec{Template: template("backup", corev1.RestartPolicyNever)},
		}},
	}, metav1.CreateOptions{})
	must(t, err)
	w.job, err = c.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
		ObjectMeta: meta("backup-29000000", "batch", controller("batch/v1", "CronJob", w.cron)),
		Spec:       batchv1.JobSpec{Template: template("backup", corev1.RestartPolicyNever)},
	}, metav1.CreateOptions{})
	must(t, err)
	return w
}

// controller is the controller owner reference to o, of kind at
// apiVersion.
func controller(apiVersion, kind string, o metav1.Object) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: o.GetName(), UID: o.GetUID(), Controller: ptr.To(true)}
}

// ownerOf returns the controller owner reference a pod of o has.
func ownerOf(o metav1.Object) metav1.OwnerReference {
	switch o.(type) {
	case *appsv1.ReplicaSet:
		return controller("apps/v1", "ReplicaSet", o)
	case *appsv1.StatefulSet:
		return controller("apps/v1", "StatefulSet", o)
	case *appsv1.DaemonSet:
		return controller("apps/v1", "DaemonSet", o)
	case *batchv1.Job:
		return controller("batch/v1", "Job", o)
	}
	panic(fmt.Sprintf("no pod is owned by a %T", o))
}

// newPod creates a pod of owner bound to nodeName and gives it the status
// its kubelet would report: running, with ip and a start time.
func newPod(t *testing.T, c kubernetes.Interface, owner metav1.Object, name, nodeName, ip string) *corev1.Pod {
	t.Helper()
	p, err := c.CoreV1().Pods(ns).Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: map[string]string{"app": owner.GetName()},
			OwnerReferences: []metav1.OwnerReference{ownerOf(owner)},
		},
		Spec: podSpec(nodeName),
	}, metav1.CreateOptions{})
	must(t, err)
	start := metav1.NewTime(time.Now().Truncate(time.Second))
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, StartTime: &start}
	p, err = c.CoreV1().Pods(ns).UpdateStatus(t.Context(), p, metav1.UpdateOptions{})
	must(t, err)
	return p
}

// awaitOwners waits until the node view of cfg lists every owner of w
// (metadata only, as the processor lists them): podsapi has got them.
func awaitOwners(t *testing.T, cfg *rest.Config, w workloads) {
	t.Helper()
	client, err := metadata.NewForConfig(cfg)
	must(t, err)
	owners := map[schema.GroupVersionResource]string{
		appsv1.SchemeGroupVersion.WithResource("deployments"):  w.deploy.Name,
		appsv1.SchemeGroupVersion.WithResource("replicasets"):  w.rs.Name,
		appsv1.SchemeGroupVersion.WithResource("statefulsets"): w.sts.Name,
		appsv1.SchemeGroupVersion.WithResource("daemonsets"):   w.ds.Name,
		batchv1.SchemeGroupVersion.WithResource("jobs"):        w.job.Name,
		batchv1.SchemeGroupVersion.WithResource("cronjobs"):    w.cron.Name,
	}
	kubetest.Eventually(t, "the node view's owners", func() error {
		for gvr, name := range owners {
			list, err := client.Resource(gvr).Namespace(ns).List(t.Context(), metav1.ListOptions{})
			if err != nil {
				return fmt.Errorf("%s: %w", gvr.Resource, err)
			}
			if !slices.ContainsFunc(list.Items, func(o metav1.PartialObjectMetadata) bool { return o.Name == name }) {
				return fmt.Errorf("%s: %s is not in the node view yet", gvr.Resource, name)
			}
		}
		return nil
	})
}

// startTime is k8s.pod.start_time as the processor documents it: the
// pod's creation time in RFC 3339.
func startTime(t *testing.T, p *corev1.Pod) string {
	t.Helper()
	b, err := p.CreationTimestamp.MarshalText()
	must(t, err)
	return string(b)
}

func podSpec(nodeName string) corev1.PodSpec {
	return corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10"}}}
}

func create(ctx context.Context, c kubernetes.Interface, n *corev1.Namespace) error {
	_, err := c.CoreV1().Namespaces().Create(ctx, n, metav1.CreateOptions{})
	return err
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
