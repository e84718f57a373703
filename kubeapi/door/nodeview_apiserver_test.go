package door_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/podsapi/podsapi/kubeapi/door"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/kubetest"
	"github.com/podsapi/podsapi/workload"
)

// slicePodSpec is the pod spec of every pod and template of the node
// view's tests; jobPodSpec a Job's.
var (
	slicePodSpec = corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}
	jobPodSpec   = corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: slicePodSpec.Containers}
)

// cluster creates the objects of the node view's tests through client-go:
// the test API server has no controller manager, so the test writes the
// owner references the controllers would.
type cluster struct {
	t     *testing.T
	admin kubernetes.Interface
}

// creator is a typed client's Create.
type creator[T runtime.Object] interface {
	Create(context.Context, T, metav1.CreateOptions) (T, error)
}

// create creates obj with c and returns it as the API server stored it.
func create[T runtime.Object](t *testing.T, c creator[T], obj T) T {
	t.Helper()
	got, err := c.Create(t.Context(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// meta is the metadata of an object of ns named name, controlled by owner
// (none if nil).
func meta(ns, name string, owner *metav1.OwnerReference) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}}
	if owner != nil {
		m.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return m
}

// controlledBy is the controller reference of o, of apiVersion and kind.
func controlledBy(apiVersion, kind string, o metav1.Object) *metav1.OwnerReference {
	yes := true
	return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: o.GetName(), UID: o.GetUID(), Controller: &yes}
}

func template(name string) (*metav1.LabelSelector, corev1.PodTemplateSpec) {
	labels := map[string]string{"app": name}
	return &metav1.LabelSelector{MatchLabels: labels}, corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: slicePodSpec}
}

func (c cluster) namespace(name string) {
	create(c.t, c.admin.CoreV1().Namespaces(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"team": name}}})
}

func (c cluster) pod(ns, name, node string, owner *metav1.OwnerReference) *corev1.Pod {
	spec := slicePodSpec
	spec.NodeName = node
	return create(c.t, c.admin.CoreV1().Pods(ns), &corev1.Pod{ObjectMeta: meta(ns, name, owner), Spec: spec})
}

func (c cluster) deployment(ns, name string) *appsv1.Deployment {
	sel, tmpl := template(name)
	return create(c.t, c.admin.AppsV1().Deployments(ns), &appsv1.Deployment{ObjectMeta: meta(ns, name, nil), Spec: appsv1.DeploymentSpec{Selector: sel, Template: tmpl}})
}

func (c cluster) replicaSet(ns, name string, owner *metav1.OwnerReference) *appsv1.ReplicaSet {
	sel, tmpl := template(name)
	return create(c.t, c.admin.AppsV1().ReplicaSets(ns), &appsv1.ReplicaSet{ObjectMeta: meta(ns, name, owner), Spec: appsv1.ReplicaSetSpec{Selector: sel, Template: tmpl}})
}

func (c cluster) statefulSet(ns, name string) *appsv1.StatefulSet {
	sel, tmpl := template(name)
	return create(c.t, c.admin.AppsV1().StatefulSets(ns), &appsv1.StatefulSet{ObjectMeta: meta(ns, name, nil), Spec: appsv1.StatefulSetSpec{Selector: sel, Template: tmpl}})
}

func (c cluster) daemonSet(ns, name string) *appsv1.DaemonSet {
	sel, tmpl := template(name)
	return create(c.t, c.admin.AppsV1().DaemonSets(ns), &appsv1.DaemonSet{ObjectMeta: meta(ns, name, nil), Spec: appsv1.DaemonSetSpec{Selector: sel, Template: tmpl}})
}

func (c cluster) job(ns, name string, owner *metav1.OwnerReference) *batchv1.Job {
	return create(c.t, c.admin.BatchV1().Jobs(ns), &batchv1.Job{ObjectMeta: meta(ns, name, owner), Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: jobPodSpec}}})
}

func (c cluster) cronJob(ns, name string) *batchv1.CronJob {
	return create(c.t, c.admin.BatchV1().CronJobs(ns), &batchv1.CronJob{ObjectMeta: meta(ns, name, nil), Spec: batchv1.CronJobSpec{
		Schedule: "*/5 * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: jobPodSpec}}},
	}})
}

// ownerPaths are the collections of the owner kinds, as a client reads
// them through either view.
var ownerPaths = []string{
	"/apis/apps/v1/replicasets", "/apis/apps/v1/deployments", "/apis/apps/v1/statefulsets",
	"/apis/apps/v1/daemonsets", "/apis/batch/v1/jobs", "/apis/batch/v1/cronjobs",
}

// TestDoorAPIServerNodeView serves the node view (Settings.NodeView) from
// a workload resolver's slice against a real kube-apiserver holding pods
// of the door's node and of another, a Deployment → ReplicaSet → pod, a
// CronJob → Job → pod, a StatefulSet, a DaemonSet, and namespaces with and
// without the node's pods. Through /views/node: each object of the slice
// is the API server's (code, kind, content but the resourceVersion and
// managed fields); each list holds exactly the slice; a get outside it is
// the API server's 404 for a missing object, byte for byte; a caller
// without the right gets the API server's 403, byte for byte; informers
// see an owner ADDED with its first pod and DELETED with its last, while
// no list or watch of an owner kind reaches the API server; and through
// an outage the view keeps answering what it holds, the slice's age
// growing.
func TestDoorAPIServerNodeView(t *testing.T) {
	cp := kubetest.Start(t, nsReader, nsLister, nobody)
	grantRoles(t, cp)
	createNodes(t, cp)
	c := cluster{t: t, admin: cp.Admin}
	for _, ns := range []string{"shop", "ops", "away"} {
		c.namespace(ns)
	}
	dep := c.deployment("shop", "web")
	rs := c.replicaSet("shop", "web-1", controlledBy("apps/v1", "Deployment", dep))
	sts := c.statefulSet("shop", "cache")
	ds := c.daemonSet("ops", "agent")
	cron := c.cronJob("ops", "backup")
	job := c.job("ops", "backup-1", controlledBy("batch/v1", "CronJob", cron))
	far := c.deployment("away", "far")
	farRS := c.replicaSet("away", "far-1", controlledBy("apps/v1", "Deployment", far))
	mine := []*corev1.Pod{
		c.pod("shop", "web-1-a", kindsNode, controlledBy("apps/v1", "ReplicaSet", rs)),
		c.pod("shop", "cache-0", kindsNode, controlledBy("apps/v1", "StatefulSet", sts)),
		c.pod("ops", "agent-a", kindsNode, controlledBy("apps/v1", "DaemonSet", ds)),
		c.pod("ops", "backup-1-a", kindsNode, controlledBy("batch/v1", "Job", job)),
	}
	c.pod("shop", "web-1-b", "node-2", controlledBy("apps/v1", "ReplicaSet", rs))
	c.pod("ops", "agent-b", "node-2", controlledBy("apps/v1", "DaemonSet", ds))
	c.pod("away", "far-1-a", "node-2", controlledBy("apps/v1", "ReplicaSet", farRS))

	// podsapi's pod source and workload resolution, as podsapi-server
	// wires them: the resolver sees every pod the store takes.
	reg := prometheus.NewRegistry()
	own := cp.Config(kubetest.AdminUser, cp.Host())
	own.QPS, own.Burst = 100, 200 // Every object asked again every second.
	getter, err := workload.NewObjectGetter(own)
	if err != nil {
		t.Fatal(err)
	}
	r := workload.NewResolver(workload.WithGetter(getter), workload.WithSlice(), workload.WithRefreshInterval(time.Second),
		workload.WithRetryInterval(50*time.Millisecond), workload.WithGetTimeout(10*time.Second), workload.WithRegisterer(reg),
		workload.WithLogger(slog.New(slog.DiscardHandler)))
	ctx, cancel := context.WithCancel(context.Background())
	resolved := make(chan struct{})
	go func() { defer close(resolved); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-resolved })
	st := store.New()
	sink := r.Sink(st)
	for _, p := range mine {
		sink.Upsert(p)
	}
	sink.MarkSynced()
	_, s := openViews(t, cp, cp.Host(), reg, st, r)

	admin, lister, reader, none := cp.Token(kubetest.AdminUser), cp.Token(nsLister), cp.Token(nsReader), cp.Token(nobody)
	doorClient, apiClient := s.client(), apiClient(t, cp)
	view, api := "https://"+s.addr+door.NodeViewPath, "https://"+cp.Host()
	listed := func(path string) []string {
		t.Helper()
		a := viewGet(t, doorClient, view+path, admin)
		if a.code == http.StatusServiceUnavailable && a.status(t).Reason == metav1.StatusReasonServiceUnavailable {
			return nil // The slice has not been read yet.
		}
		if a.code != 200 {
			t.Fatalf("GET %s through the node view: %d %s", path, a.code, a.body)
		}
		return itemNames(t, a.body)
	}
	waitUntil(t, "the node view to hold the slice", func() bool {
		return slices.Equal(listed("/api/v1/namespaces"), []string{"ops", "shop"}) && len(listed("/apis/batch/v1/cronjobs")) == 1
	})

	t.Run("each object of the slice is the API server's", func(t *testing.T) {
		for _, path := range []string{
			"/api/v1/namespaces/shop/pods/web-1-a", "/api/v1/namespaces/ops/pods/backup-1-a",
			"/api/v1/namespaces/shop", "/api/v1/namespaces/ops", "/api/v1/nodes/" + kindsNode,
			"/apis/apps/v1/namespaces/shop/replicasets/web-1", "/apis/apps/v1/namespaces/shop/deployments/web",
			"/apis/apps/v1/namespaces/shop/statefulsets/cache", "/apis/apps/v1/namespaces/ops/daemonsets/agent",
			"/apis/batch/v1/namespaces/ops/jobs/backup-1", "/apis/batch/v1/namespaces/ops/cronjobs/backup",
		} {
			got, want := viewGet(t, doorClient, view+path, admin), get(t, apiClient, api+path, admin)
			if got.code != want.code || got.code != 200 {
				t.Errorf("%s: node view %d %s; API server %d %s", path, got.code, got.body, want.code, want.body)
				continue
			}
			if g, w := content(t, got.body), content(t, want.body); !reflect.DeepEqual(g, w) {
				t.Errorf("%s: node view's\n%v\nAPI server's\n%v", path, g, w)
			}
		}
	})

	t.Run("each list is the slice", func(t *testing.T) {
		for _, c := range []struct {
			path string
			want []string
		}{
			{"/api/v1/pods", []string{"ops/agent-a", "ops/backup-1-a", "shop/cache-0", "shop/web-1-a"}},
			{"/api/v1/namespaces/shop/pods", []string{"shop/cache-0", "shop/web-1-a"}},
			{"/api/v1/namespaces/away/pods", nil},
			{"/api/v1/namespaces", []string{"ops", "shop"}},
			{"/api/v1/nodes", []string{kindsNode}},
			{"/apis/apps/v1/replicasets", []string{"shop/web-1"}},
			{"/apis/apps/v1/deployments", []string{"shop/web"}},
			{"/apis/apps/v1/statefulsets", []string{"shop/cache"}},
			{"/apis/apps/v1/daemonsets", []string{"ops/agent"}},
			{"/apis/batch/v1/jobs", []string{"ops/backup-1"}},
			{"/apis/batch/v1/cronjobs", []string{"ops/backup"}},
			{"/apis/apps/v1/namespaces/away/deployments", nil},
		} {
			got, want := viewGet(t, doorClient, view+c.path, admin), get(t, apiClient, api+c.path, admin)
			if got.code != 200 || want.code != 200 {
				t.Errorf("%s: node view %d %s; API server %d", c.path, got.code, got.body, want.code)
				continue
			}
			if names := itemNames(t, got.body); !slices.Equal(names, c.want) {
				t.Errorf("%s: node view lists %q, want %q", c.path, names, c.want)
			}
			if g, w := summary(t, got.body), summary(t, want.body); g.Kind != w.Kind || g.APIVersion != w.APIVersion {
				t.Errorf("%s: node view's list is a %s %s, the API server's %s %s", c.path, g.APIVersion, g.Kind, w.APIVersion, w.Kind)
			}
		}
	})

	t.Run("a get outside the slice is 404", func(t *testing.T) {
		for _, c := range []struct{ path, name string }{
			{"/api/v1/namespaces/away", "away"},
			{"/api/v1/namespaces/default", "default"},
			{"/api/v1/namespaces/ops/pods/agent-b", "agent-b"},
			{"/api/v1/nodes/node-2", "node-2"},
			{"/apis/apps/v1/namespaces/away/replicasets/far-1", "far-1"},
			{"/apis/apps/v1/namespaces/away/deployments/far", "far"},
			{"/apis/batch/v1/namespaces/shop/jobs/backup-1", "backup-1"},
		} {
			got := viewGet(t, doorClient, view+c.path, admin)
			// The API server's answer for an object that does not exist,
			// under the same name.
			missing := get(t, apiClient, api+strings.TrimSuffix(c.path, c.name)+"missing-object", admin)
			want := strings.ReplaceAll(strings.TrimSpace(string(missing.body)), "missing-object", c.name)
			if got.code != 404 || missing.code != 404 || strings.TrimSpace(string(got.body)) != want {
				t.Errorf("%s: node view %d %s\nwant 404 %s", c.path, got.code, got.body, want)
			}
		}
	})

	t.Run("a caller without the right gets the API server's 403", func(t *testing.T) {
		for _, c := range []struct{ path, token string }{
			{"/api/v1/namespaces", none},
			{"/api/v1/namespaces/shop", lister},
			{"/api/v1/nodes/" + kindsNode, reader},
			{"/api/v1/pods", reader},
			{"/api/v1/namespaces/shop/pods/web-1-a", reader},
			{"/apis/apps/v1/replicasets", none},
			{"/apis/apps/v1/namespaces/shop/deployments/web", reader},
			{"/apis/batch/v1/namespaces/ops/cronjobs?watch=true", lister},
			{"/apis/batch/v1/jobs?fieldSelector=metadata.name%3Dbackup-1", none},
		} {
			got, want := viewGet(t, doorClient, view+c.path, c.token), get(t, apiClient, api+c.path, c.token)
			if g, w := strings.TrimSpace(string(got.body)), strings.TrimSpace(string(want.body)); got.code != 403 || got.code != want.code || g != w {
				t.Errorf("%s: node view %d %s\nAPI server %d %s", c.path, got.code, g, want.code, w)
			}
		}
	})

	t.Run("kubectl", func(t *testing.T) { kubectlSlice(t, cp, s) })

	// From here on, no request of the test reaches the API server but
	// podsapi's and the informers' through the node view.
	before := ownerRequests(t, cp)
	client := kubernetes.NewForConfigOrDie(&rest.Config{Host: view, BearerToken: admin, TLSClientConfig: rest.TLSClientConfig{CAData: s.ca}})
	events := &sliceEvents{}
	informCtx, stopInformers := context.WithCancel(t.Context())
	defer stopInformers()
	for _, inf := range []struct {
		rc       rest.Interface
		resource string
		obj      runtime.Object
	}{
		{client.CoreV1().RESTClient(), "namespaces", &corev1.Namespace{}},
		{client.AppsV1().RESTClient(), "replicasets", &appsv1.ReplicaSet{}},
		{client.AppsV1().RESTClient(), "deployments", &appsv1.Deployment{}},
		{client.BatchV1().RESTClient(), "jobs", &batchv1.Job{}},
		{client.BatchV1().RESTClient(), "cronjobs", &batchv1.CronJob{}},
	} {
		i := cache.NewSharedIndexInformer(cache.NewListWatchFromClient(inf.rc, inf.resource, "", fields.Everything()), inf.obj, 0, cache.Indexers{})
		_, _ = i.AddEventHandler(events.handler(inf.resource))
		go i.RunWithContext(informCtx)
		if !cache.WaitForCacheSync(t.Context().Done(), i.HasSynced) {
			t.Fatalf("the informer of %s through the node view did not sync", inf.resource)
		}
	}
	events.await(t, "the informers' lists", "ADDED namespaces ops", "ADDED namespaces shop", "ADDED replicasets shop/web-1",
		"ADDED deployments shop/web", "ADDED jobs ops/backup-1", "ADDED cronjobs ops/backup")

	t.Run("an owner comes with its first pod and goes with its last", func(t *testing.T) {
		c.namespace("late")
		lateDep := c.deployment("late", "api")
		lateRS := c.replicaSet("late", "api-1", controlledBy("apps/v1", "Deployment", lateDep))
		lateCron := c.cronJob("late", "report")
		lateJob := c.job("late", "report-1", controlledBy("batch/v1", "CronJob", lateCron))
		a := c.pod("late", "api-1-a", kindsNode, controlledBy("apps/v1", "ReplicaSet", lateRS))
		b := c.pod("late", "api-1-b", kindsNode, controlledBy("apps/v1", "ReplicaSet", lateRS))
		j := c.pod("late", "report-1-a", kindsNode, controlledBy("batch/v1", "Job", lateJob))
		sink.Upsert(a)
		sink.Upsert(j)
		events.await(t, "the first pods", "ADDED namespaces late", "ADDED replicasets late/api-1", "ADDED deployments late/api",
			"ADDED jobs late/report-1", "ADDED cronjobs late/report")
		sink.Upsert(b)
		sink.Delete(a.UID)
		sink.Delete(j.UID)
		events.await(t, "the Job's last pod gone", "DELETED jobs late/report-1", "DELETED cronjobs late/report")
		if events.saw("DELETED replicasets late/api-1") {
			t.Error("the ReplicaSet left while a pod of it is still on the node")
		}
		sink.Delete(b.UID)
		events.await(t, "the last pods gone", "DELETED replicasets late/api-1", "DELETED deployments late/api", "DELETED namespaces late")
	})

	t.Run("no list or watch of an owner kind reaches the API server", func(t *testing.T) {
		after := ownerRequests(t, cp)
		for key, n := range after {
			if n != before[key] {
				t.Errorf("%s: %v before the informers, %v after, want no more", key, before[key], n)
			}
		}
	})

	t.Run("through an outage", func(t *testing.T) {
		cp.StopAPIServer(t)
		waitUntil(t, "the slice's age to grow", func() bool {
			return counted(t, reg, "podsapi_workload_slice_age_seconds", "", "") > 3
		})
		if names := listed("/apis/apps/v1/replicasets"); !slices.Equal(names, []string{"shop/web-1"}) {
			t.Errorf("during the outage the node view lists %q, want what it held", names)
		}
		if names := listed("/api/v1/pods"); len(names) != len(mine) {
			t.Errorf("during the outage the node view lists the pods %q, want the %d it held", names, len(mine))
		}
	})
}

// viewGet is get as client-go asks: a 429 (the door's budget of reviews
// for the caller, 10 a second after the first 20: the test asks many
// accesses at once) is asked again after its Retry-After.
func viewGet(t *testing.T, c *http.Client, url, token string) answer {
	t.Helper()
	for {
		a := get(t, c, url, token)
		if a.code != http.StatusTooManyRequests {
			return a
		}
		secs, err := strconv.Atoi(a.header.Get("Retry-After"))
		if err != nil {
			t.Fatalf("429 with Retry-After %q", a.header.Get("Retry-After"))
		}
		select {
		case <-time.After(time.Duration(secs) * time.Second):
		case <-t.Context().Done():
			t.Fatalf("GET %s: still 429 at the end of the test", url)
		}
	}
}

// itemNames returns the namespace/name of each item of a list.
func itemNames(t *testing.T, body []byte) []string {
	t.Helper()
	var list metav1.PartialObjectMetadataList
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	var names []string
	for _, it := range list.Items {
		names = append(names, strings.TrimPrefix(it.Namespace+"/"+it.Name, "/"))
	}
	slices.Sort(names)
	return names
}

// content is an object's JSON as compared: everything but its
// resourceVersion and managed fields, which the node view does not keep.
func content(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal(body, &obj); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if m, ok := obj["metadata"].(map[string]any); ok {
		delete(m, "resourceVersion")
		delete(m, "managedFields")
	}
	return obj
}

// ownerRequests returns the lists the API server has answered and the
// watches it has open, of each owner kind: apiserver_request_total with
// verb LIST, apiserver_longrunning_requests with verb WATCH.
func ownerRequests(t *testing.T, cp *kubetest.ControlPlane) map[string]float64 {
	t.Helper()
	families := apiserverMetrics(t, cp)
	kinds := map[string]bool{}
	for _, p := range ownerPaths {
		kinds[p[strings.LastIndexByte(p, '/')+1:]] = true
	}
	n := map[string]float64{}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		if l := labelsOf(m); l["verb"] == "LIST" && kinds[l["resource"]] {
			n["LIST "+l["resource"]] += m.GetCounter().GetValue()
		}
	}
	for _, m := range families["apiserver_longrunning_requests"].GetMetric() {
		if l := labelsOf(m); l["verb"] == "WATCH" && kinds[l["resource"]] {
			n["WATCH "+l["resource"]] += m.GetGauge().GetValue()
		}
	}
	return n
}

// sliceEvents records the events informers deliver, as "ADDED resource
// namespace/name".
type sliceEvents struct {
	mu   sync.Mutex
	seen []string
}

func (e *sliceEvents) handler(resource string) cache.ResourceEventHandler {
	record := func(verb string, obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		m, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		e.seen = append(e.seen, verb+" "+resource+" "+strings.TrimPrefix(m.GetNamespace()+"/"+m.GetName(), "/"))
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { record("ADDED", obj) },
		DeleteFunc: func(obj any) { record("DELETED", obj) },
	}
}

func (e *sliceEvents) saw(event string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Contains(e.seen, event)
}

// await waits until every event of want was seen.
func (e *sliceEvents) await(t *testing.T, what string, want ...string) {
	t.Helper()
	waitUntil(t, what+" "+strings.Join(want, ", "), func() bool {
		for _, ev := range want {
			if !e.saw(ev) {
				return false
			}
		}
		return true
	})
}

// kubectlSlice runs kubectl through the node view with the admin's token
// (a kubeconfig as podsctl kubeconfig --view node writes it): its lists
// are the node's slice.
func kubectlSlice(t *testing.T, cp *kubetest.ControlPlane, s *served) {
	bin := kubectlBin(t)
	dir := t.TempDir()
	ca := filepath.Join(dir, "door-ca.crt")
	if err := os.WriteFile(ca, s.ca, 0o600); err != nil {
		t.Fatal(err)
	}
	kc := kubetest.WriteKubeconfig(t, filepath.Join(dir, "kubeconfig"), kubetest.AdminUser, cp.Token(kubetest.AdminUser),
		kubetest.Server{Name: "node", Host: s.addr + door.NodeViewPath, CAFile: ca})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "namespaces"}, "namespace/ops namespace/shop"},
		{[]string{"get", "pods", "-A"}, "pod/agent-a pod/backup-1-a pod/cache-0 pod/web-1-a"},
		{[]string{"get", "replicasets,deployments", "-A"}, "replicaset.apps/web-1 deployment.apps/web"},
		{[]string{"get", "cronjobs", "-n", "ops"}, "cronjob.batch/backup"},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		out, err := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", kc, "--cache-dir", t.TempDir(), "-o", "name"}, c.args...)...).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("kubectl %v: %v: %s", c.args, err, out)
		}
		if got := strings.Join(strings.Fields(string(out)), " "); got != c.want {
			t.Errorf("kubectl %v through the node view: %q, want %q", c.args, got, c.want)
		}
	}
}
