package otel_test

import (
	"context"
	"fmt"
	"maps"
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
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/podsapi/podsapi/integrations/harness"
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
// kubeconfig's context: "direct" (the API server) or "podsapi" (the front
// door). It asks for the pod's name, namespace, UID, start time and
// deployment name, and also the deployment's UID and a namespace label,
// which make it watch ReplicaSets and Namespaces as well (metadata only).
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
  - k8s.deployment.name
  - k8s.deployment.uid
  labels:
  - tag_name: team
    key: team
    from: namespace
pod_association:
- sources:
  - from: resource_attribute
    name: k8s.pod.ip
- sources:
  - from: connection
`

// TestK8sAttributes runs the processor directly against the API server and
// through podsapi's door at once, and checks that a span of a pod's IP gets
// the same attributes from both, that a pod created later is found by
// both, that a pod of another node is enriched by neither, and what each
// run asked the API server.
func TestK8sAttributes(t *testing.T) {
	cluster := harness.StartCluster(t)
	// One agent (a ServiceAccount) per run of the processor, so that the
	// API server's audit log tells each run's requests apart, with the
	// ClusterRole of the processor's README.
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "namespaces", "nodes"}, Verbs: []string{"get", "watch", "list"}},
		{APIGroups: []string{"apps"}, Resources: []string{"replicasets", "deployments", "statefulsets", "daemonsets"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs", "cronjobs"}, Verbs: []string{"get", "list", "watch"}},
	}
	directAgent := cluster.Agent(t, "otel", "direct", rules...)
	doorAgent := cluster.Agent(t, "otel", "podsapi", rules...)
	admin := cluster.Admin
	ctx := t.Context()
	must(t, create(ctx, admin, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"team": "checkout"}}}))
	deploy := newDeployment(t, admin)
	rs := newReplicaSet(t, admin, deploy)
	web := newPod(t, admin, rs, "web-5d4f8c7b9-abcde", node, "10.244.1.5")
	away := newPod(t, admin, rs, "web-5d4f8c7b9-fghij", otherNode, "10.244.2.7")

	pa := cluster.StartPodsapi(t, node)
	t.Setenv("KUBECONFIG", directAgent.Kubeconfig(t, pa, harness.ContextDirect))
	direct := startProcessor(t, harness.ContextDirect)
	// Each agent's kubeconfig names both contexts; the door's run uses its
	// own agent's so that the two runs' requests are told apart.
	t.Setenv("KUBECONFIG", doorAgent.Kubeconfig(t, pa, harness.ContextPodsapi))
	door := startProcessor(t, harness.ContextPodsapi)

	want := map[string]string{
		"k8s.pod.ip":          "10.244.1.5",
		"k8s.pod.name":        web.Name,
		"k8s.namespace.name":  ns,
		"k8s.pod.uid":         string(web.UID),
		"k8s.pod.start_time":  startTime(t, web),
		"k8s.deployment.name": deploy.Name,
		"k8s.deployment.uid":  string(deploy.UID),
		"team":                "checkout",
	}
	t.Run("a span of a pod's IP", func(t *testing.T) {
		d := direct.waitFor(t, "10.244.1.5", want)
		p := door.waitFor(t, "10.244.1.5", want)
		if !maps.Equal(d, p) {
			t.Fatalf("directly %v, through podsapi %v", d, p)
		}
	})
	t.Run("a pod created later", func(t *testing.T) {
		later := newPod(t, admin, rs, "web-5d4f8c7b9-klmno", node, "10.244.1.9")
		w := maps.Clone(want)
		w["k8s.pod.ip"], w["k8s.pod.name"], w["k8s.pod.uid"], w["k8s.pod.start_time"] = "10.244.1.9", later.Name, string(later.UID), startTime(t, later)
		d := direct.waitFor(t, "10.244.1.9", w)
		p := door.waitFor(t, "10.244.1.9", w)
		if !maps.Equal(d, p) {
			t.Fatalf("directly %v, through podsapi %v", d, p)
		}
	})
	t.Run("a pod of another node", func(t *testing.T) {
		// Both have seen every change made before the later pod, so a pod
		// made before it is known to both, or to neither: filter.node.
		only := map[string]string{"k8s.pod.ip": away.Status.PodIP}
		if got := direct.enrich(t, away.Status.PodIP); !maps.Equal(got, only) {
			t.Fatalf("directly: %v, want %v", got, only)
		}
		if got := door.enrich(t, away.Status.PodIP); !maps.Equal(got, only) {
			t.Fatalf("through podsapi: %v, want %v", got, only)
		}
	})

	t.Run("what each asked the API server", func(t *testing.T) {
		d, p, own := cluster.Requests(t, directAgent.User()), cluster.Requests(t, doorAgent.User()), cluster.Requests(t, harness.PodsapiUser)
		t.Logf("directly, the processor asked the API server: %v", harness.Summary(d))
		t.Logf("through podsapi, the processor asked the API server: %v", harness.Summary(p))
		t.Logf("podsapi itself asked the API server: %v", harness.Summary(own))
		// client-go v0.37's informers list with a streaming watch
		// (sendInitialEvents=true): one watch, no list.
		if harness.Count(d, "watch", "pods") == 0 {
			t.Errorf("directly: no watch of pods at the API server: %v", d)
		}
		if n := harness.Count(p, "watch", "pods") + harness.Count(p, "list", "pods"); n != 0 {
			t.Errorf("through podsapi: %d lists and watches of pods reached the API server: %v", n, p)
		}
		for _, res := range []string{"replicasets", "namespaces"} {
			if harness.Count(p, "watch", res) == 0 || harness.Count(d, "watch", res) == 0 {
				t.Errorf("%s: not watched at the API server both ways (directly %v, through podsapi %v)", res, d, p)
			}
		}
		if n := harness.Count(own, "watch", "pods"); n != 1 {
			t.Errorf("podsapi's own watches of pods: %d, want 1: %v", n, own)
		}
	})
	t.Run("what the door answered", func(t *testing.T) {
		counts := pa.Door(t)
		local, proxied := counts.Route("local"), counts.Route("proxied")
		openLocal, openProxied := counts.InFlight["local"], counts.InFlight["proxied"]
		t.Logf("door: %v local and %v proxied requests answered, %v local and %v proxied open (watches)", local, proxied, openLocal, openProxied)
		// A request counts in requests_total when it ends: the pods'
		// watch (the informer's list too, a streaming watch) is open.
		if openLocal != 1 {
			t.Errorf("the door holds %v watches of the node's pods, want 1", openLocal)
		}
		if openProxied == 0 {
			t.Errorf("the door passes no watch (of replicasets and namespaces) through")
		}
	})
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

func newDeployment(t *testing.T, c kubernetes.Interface) *appsv1.Deployment {
	t.Helper()
	labels := map[string]string{"app": "web"}
	d, err := c.AppsV1().Deployments(ns).Create(t.Context(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec("")},
		},
	}, metav1.CreateOptions{})
	must(t, err)
	return d
}

// newReplicaSet creates the ReplicaSet that the deployment controller
// would (there is none in the test's control plane).
func newReplicaSet(t *testing.T, c kubernetes.Interface, d *appsv1.Deployment) *appsv1.ReplicaSet {
	t.Helper()
	labels := map[string]string{"app": "web", "pod-template-hash": "5d4f8c7b9"}
	rs, err := c.AppsV1().ReplicaSets(ns).Create(t.Context(), &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-5d4f8c7b9", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr.To(true)}},
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec("")},
		},
	}, metav1.CreateOptions{})
	must(t, err)
	return rs
}

// newPod creates a pod of rs bound to nodeName and gives it the status its
// kubelet would report: running, with ip and a start time.
func newPod(t *testing.T, c kubernetes.Interface, rs *appsv1.ReplicaSet, name, nodeName, ip string) *corev1.Pod {
	t.Helper()
	p, err := c.CoreV1().Pods(ns).Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: rs.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}},
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
