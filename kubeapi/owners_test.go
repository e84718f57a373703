package kubeapi_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/utils/ptr"

	"github.com/podsapi/podsapi/kindstore"
	"github.com/podsapi/podsapi/kubeapi"
)

// The owner kinds' resources.
var (
	replicaSetsGVR  = appsv1.SchemeGroupVersion.WithResource("replicasets")
	deploymentsGVR  = appsv1.SchemeGroupVersion.WithResource("deployments")
	statefulSetsGVR = appsv1.SchemeGroupVersion.WithResource("statefulsets")
	daemonSetsGVR   = appsv1.SchemeGroupVersion.WithResource("daemonsets")
	jobsGVR         = batchv1.SchemeGroupVersion.WithResource("jobs")
	cronJobsGVR     = batchv1.SchemeGroupVersion.WithResource("cronjobs")
)

// ownerMeta returns the metadata of an owner object of namespace and name,
// with the label app=<app>.
func ownerMeta(ns, name, app string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name), ResourceVersion: "5",
		Labels: map[string]string{"app": app}, CreationTimestamp: metav1.Unix(time.Now().Unix(), 0)}
}

// podTemplate is a pod template of one container.
var podTemplate = corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img:1"}}}}

// owners are synced stores of the six owner kinds, fed as informers feed
// them.
type owners struct {
	rs   *kindstore.ReplicaSets
	jobs *kindstore.Jobs
	opts []kubeapi.Option
}

// ownerStores returns synced stores of the owner kinds holding two
// ReplicaSets (web-1 in default, db-1 in data), two Jobs (done, succeeded
// once; run, in data) and one object of each other kind, and the options
// that serve them.
func ownerStores() owners {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	rs, deps, sts := kindstore.NewReplicaSets(), kindstore.NewDeployments(), kindstore.NewStatefulSets()
	dss, jobs, cjs := kindstore.NewDaemonSets(), kindstore.NewJobs(), kindstore.NewCronJobs()
	rs.OnAdd(&appsv1.ReplicaSet{ObjectMeta: ownerMeta("default", "web-1", "web"),
		Spec:   appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3), Selector: sel, Template: podTemplate},
		Status: appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 2}}, true)
	rs.OnAdd(&appsv1.ReplicaSet{ObjectMeta: ownerMeta("data", "db-1", "db")}, true)
	deps.OnAdd(&appsv1.Deployment{ObjectMeta: ownerMeta("default", "web", "web"),
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: sel, Template: podTemplate}}, true)
	sts.OnAdd(&appsv1.StatefulSet{ObjectMeta: ownerMeta("data", "db", "db"), Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1)}}, true)
	dss.OnAdd(&appsv1.DaemonSet{ObjectMeta: ownerMeta("kube-system", "agent", "agent")}, true)
	jobs.OnAdd(&batchv1.Job{ObjectMeta: ownerMeta("default", "done", "batch"), Status: batchv1.JobStatus{Succeeded: 1}}, true)
	jobs.OnAdd(&batchv1.Job{ObjectMeta: ownerMeta("data", "run", "batch")}, true)
	cjs.OnAdd(&batchv1.CronJob{ObjectMeta: ownerMeta("default", "nightly", "batch"), Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *"}}, true)
	o := owners{rs: rs, jobs: jobs}
	for gvr, s := range map[schema.GroupVersionResource]interface {
		kubeapi.PodReader
		MarkSynced()
	}{replicaSetsGVR: rs, deploymentsGVR: deps, statefulSetsGVR: sts, daemonSetsGVR: dss, jobsGVR: jobs, cronJobsGVR: cjs} {
		s.MarkSynced()
		o.opts = append(o.opts, kubeapi.WithResource(gvr, s))
	}
	return o
}

// TestOwnersLocal pins which requests of the owner kinds the handler
// answers itself, and the rights each needs with the resource's group.
func TestOwnersLocal(t *testing.T) {
	o := ownerStores()
	full := handler(newStore(), o.opts...)
	view := handler(newStore(), append(o.opts, kubeapi.WithNodeView())...)
	for _, tt := range []struct {
		name, target string
		want         []kubeapi.Access // of the full view
		view         bool             // local in the node view (with want's accesses, or a get's of the path)
	}{
		{"list of every namespace", "/apis/apps/v1/replicasets",
			[]kubeapi.Access{{Verb: "list", Group: "apps", Resource: "replicasets"}}, true},
		{"watch in a namespace, with selectors", "/apis/batch/v1/namespaces/data/jobs?watch=true&labelSelector=app%3Dbatch&fieldSelector=metadata.name%3Drun",
			[]kubeapi.Access{{Verb: "watch", Namespace: "data", Group: "batch", Resource: "jobs", Name: "run", FieldSelector: "metadata.name=run", LabelSelector: "app=batch"}}, true},
		{"get of an object held", "/apis/apps/v1/namespaces/default/deployments/web",
			[]kubeapi.Access{{Verb: "get", Namespace: "default", Group: "apps", Resource: "deployments", Name: "web"}}, true},
		{"get of an object not held", "/apis/apps/v1/namespaces/default/deployments/other", nil, true},
		{"get in another namespace", "/apis/apps/v1/namespaces/data/deployments/web", nil, true},
		{"the deprecated watch of one object", "/apis/batch/v1/namespaces/default/cronjobs/nightly?watch=1", nil, false},
		{"a subresource", "/apis/apps/v1/namespaces/default/deployments/web/scale", nil, false},
		{"a get without a namespace", "/apis/apps/v1/deployments/web", nil, false},
		{"another version", "/apis/apps/v1beta2/replicasets", nil, false},
		{"a kind of the group not served", "/apis/apps/v1/controllerrevisions", nil, false},
		{"a kind of the wrong group", "/apis/batch/v1/replicasets", nil, false},
		{"a kind of another group", "/apis/networking.k8s.io/v1/ingresses", nil, false},
		{"an empty segment", "/apis/apps/v1/namespaces//replicasets", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", tt.target, nil)
			got, ok := full.Local(r)
			if ok != (tt.want != nil) || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("full view: Local(%s) = %+v, %v; want %+v", tt.target, got, ok, tt.want)
			}
			if _, ok := view.Local(r); ok != tt.view {
				t.Errorf("node view: Local(%s) local %v, want %v", tt.target, ok, tt.view)
			}
		})
	}
	// Before its store syncs, a kind is the API server's.
	unsynced := handler(newStore(), kubeapi.WithResource(jobsGVR, kindstore.NewJobs()))
	if _, ok := unsynced.Local(httptest.NewRequest("GET", "/apis/batch/v1/jobs", nil)); ok {
		t.Error("a list of jobs is local before the store synced")
	}
}

// TestWithResourceUnknown checks that WithResource refuses a resource it
// does not serve.
func TestWithResourceUnknown(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("WithResource of pods did not panic")
		}
	}()
	kubeapi.WithResource(corev1.SchemeGroupVersion.WithResource("pods"), newStore())
}

// TestOwners runs client-go's typed clients, in JSON and protobuf, against
// the handler's owner kinds: lists in a namespace and across them, with
// label selectors and the field labels the API server converts for each
// kind (and its 400 for others), gets, the API server's 404, and a watch
// resumed from a list's resourceVersion.
func TestOwners(t *testing.T) {
	for _, ct := range contentTypes {
		t.Run(ct.name, func(t *testing.T) {
			o := ownerStores()
			cs := serve(t, handler(newStore(), o.opts...)).clientset(t, ct.contentType)
			ctx := context.Background()
			all, err := cs.AppsV1().ReplicaSets("").List(ctx, metav1.ListOptions{})
			if err != nil || len(all.Items) != 2 || all.Items[0].Name != "db-1" || all.ResourceVersion != o.rs.Revision(2) {
				t.Fatalf("list: %v %+v", err, all)
			}
			in, err := cs.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web", FieldSelector: "metadata.namespace=default"})
			if err != nil || len(in.Items) != 1 || in.Items[0].Name != "web-1" || *in.Items[0].Spec.Replicas != 3 {
				t.Fatalf("list in default: %v %+v", err, in)
			}
			_, err = cs.AppsV1().ReplicaSets("").List(ctx, metav1.ListOptions{FieldSelector: "status.replicas=3"})
			if !apierrors.IsBadRequest(err) || err.Error() != `"status.replicas" is not a known field selector: only "metadata.name", "metadata.namespace"` {
				t.Fatalf("a ReplicaSet field label apps/v1 does not convert: %v", err)
			}
			jl, err := cs.BatchV1().Jobs("").List(ctx, metav1.ListOptions{FieldSelector: "status.successful=1"})
			if err != nil || len(jl.Items) != 1 || jl.Items[0].Name != "done" {
				t.Fatalf("jobs succeeded once: %v %+v", err, jl)
			}
			_, err = cs.BatchV1().Jobs("").List(ctx, metav1.ListOptions{FieldSelector: "spec.suspend=true"})
			if !apierrors.IsBadRequest(err) || err.Error() != `field label "spec.suspend" not supported for Job` {
				t.Fatalf("a Job field label not supported: %v", err)
			}
			for name, get := range map[string]func() (metav1.Object, error){
				"deployment": func() (metav1.Object, error) {
					return cs.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
				},
				"statefulset": func() (metav1.Object, error) {
					return cs.AppsV1().StatefulSets("data").Get(ctx, "db", metav1.GetOptions{})
				},
				"daemonset": func() (metav1.Object, error) {
					return cs.AppsV1().DaemonSets("kube-system").Get(ctx, "agent", metav1.GetOptions{})
				},
				"cronjob": func() (metav1.Object, error) {
					return cs.BatchV1().CronJobs("default").Get(ctx, "nightly", metav1.GetOptions{})
				},
			} {
				if obj, err := get(); err != nil || obj.GetResourceVersion() == "" || obj.GetLabels()["app"] == "" {
					t.Errorf("get %s: %v %+v", name, err, obj)
				}
			}
			_, err = cs.AppsV1().Deployments("data").Get(ctx, "web", metav1.GetOptions{})
			if !apierrors.IsNotFound(err) || err.Error() != `deployments.apps "web" not found` {
				t.Fatalf("get of an absent deployment: %v", err)
			}

			w, err := cs.AppsV1().ReplicaSets("default").Watch(ctx, metav1.ListOptions{ResourceVersion: all.ResourceVersion})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			scaled := &appsv1.ReplicaSet{ObjectMeta: ownerMeta("default", "web-1", "web"), Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](5)}}
			o.rs.OnUpdate(nil, scaled)
			o.rs.OnDelete(&appsv1.ReplicaSet{ObjectMeta: ownerMeta("data", "db-1", "db")}) // another namespace
			o.rs.OnDelete(scaled)
			ev := next(t, w)
			if got, ok := ev.Object.(*appsv1.ReplicaSet); ev.Type != watch.Modified || !ok || *got.Spec.Replicas != 5 || got.ResourceVersion != o.rs.Revision(3) {
				t.Fatalf("first event %s %+v, want MODIFIED web-1 of 5 replicas at %s", ev.Type, ev.Object, o.rs.Revision(3))
			}
			ev = next(t, w)
			if got, ok := ev.Object.(*appsv1.ReplicaSet); ev.Type != watch.Deleted || !ok || got.Name != "web-1" {
				t.Fatalf("second event %s %+v, want DELETED web-1", ev.Type, ev.Object)
			}
		})
	}
}

// TestOwnersForms asks for each owner kind as metadata (client-go's
// metadata client, in protobuf) and as Tables of the API server's
// columns.
func TestOwnersForms(t *testing.T) {
	s := serve(t, handler(newStore(), ownerStores().opts...))
	client, err := metadata.NewForConfig(metadata.ConfigFor(s.config("")))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		gvr    schema.GroupVersionResource
		get    string // the path of one object
		cols   []string
		cells3 []any // the first three cells of its row
	}{
		{replicaSetsGVR, "/apis/apps/v1/namespaces/default/replicasets/web-1",
			[]string{"Name", "Desired", "Current", "Ready", "Age", "Containers", "Images", "Selector"}, []any{"web-1", 3.0, 3.0}},
		{deploymentsGVR, "/apis/apps/v1/namespaces/default/deployments/web",
			[]string{"Name", "Ready", "Up-to-date", "Available", "Age", "Containers", "Images", "Selector"}, []any{"web", "0/3", 0.0}},
		{statefulSetsGVR, "/apis/apps/v1/namespaces/data/statefulsets/db",
			[]string{"Name", "Ready", "Age", "Containers", "Images"}, []any{"db", "0/1"}},
		{daemonSetsGVR, "/apis/apps/v1/namespaces/kube-system/daemonsets/agent",
			[]string{"Name", "Desired", "Current", "Ready", "Up-to-date", "Available", "Node Selector", "Age", "Containers", "Images", "Selector"}, []any{"agent", 0.0, 0.0}},
		{jobsGVR, "/apis/batch/v1/namespaces/default/jobs/done",
			[]string{"Name", "Status", "Completions", "Duration", "Age", "Containers", "Images", "Selector"}, []any{"done", "Running", "1/1"}},
		{cronJobsGVR, "/apis/batch/v1/namespaces/default/cronjobs/nightly",
			[]string{"Name", "Schedule", "Timezone", "Suspend", "Active", "Last Schedule", "Age", "Containers", "Images", "Selector"}, []any{"nightly", "0 3 * * *", "<none>"}},
	} {
		t.Run(c.gvr.Resource, func(t *testing.T) {
			ml, err := client.Resource(c.gvr).List(context.Background(), metav1.ListOptions{})
			if err != nil || len(ml.Items) == 0 || ml.Items[0].Labels["app"] == "" || ml.Items[0].ResourceVersion == "" {
				t.Fatalf("metadata list: %v %+v", err, ml)
			}
			resp, body := s.get(t, c.get, "application/json;as=Table;g=meta.k8s.io;v=v1")
			var table metav1.Table
			if err := json.Unmarshal(body, &table); resp.StatusCode != 200 || err != nil {
				t.Fatalf("%s: %d %v %s", c.get, resp.StatusCode, err, body)
			}
			var cols []string
			for _, d := range table.ColumnDefinitions {
				cols = append(cols, d.Name)
			}
			if !reflect.DeepEqual(cols, c.cols) || len(table.Rows) != 1 || len(table.Rows[0].Cells) != len(cols) {
				t.Fatalf("%s: columns %v, rows %+v", c.get, cols, table.Rows)
			}
			if got := table.Rows[0].Cells[:len(c.cells3)]; !reflect.DeepEqual(got, c.cells3) {
				t.Errorf("%s: cells %v, want %v first", c.get, table.Rows[0].Cells, c.cells3)
			}
		})
	}
	resp, body := s.get(t, "/apis/batch/v1/namespaces/default/jobs/done", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
	if resp.StatusCode != 406 || !strings.Contains(string(body), "(*batch.Job)") {
		t.Errorf("a metadata list of one Job: %d %s", resp.StatusCode, body)
	}
}

// TestNodeView checks that with WithNodeView the handler answers lists and
// watches of pods and nodes as the stores hold them, with no field
// selector pinning them to the node, and gets outside the stores 404,
// while the full view leaves them to the API server.
func TestNodeView(t *testing.T) {
	_, nss, nodes := kindsHandler(t)
	st := newStore(pod("default", "web-1", 1), pod("kube-system", "agent", 2))
	full := handler(st, kubeapi.WithNamespaces(nss), kubeapi.WithNode(nodes))
	view := handler(st, kubeapi.WithNamespaces(nss), kubeapi.WithNode(nodes), kubeapi.WithNodeView())
	for _, tt := range []struct {
		name, target string
		full         bool
		want         []kubeapi.Access // in the node view
	}{
		{"list of pods", "/api/v1/pods", false, []kubeapi.Access{{Verb: "list", Resource: "pods"}}},
		{"watch of a namespace's pods", "/api/v1/namespaces/default/pods?watch=1", false,
			[]kubeapi.Access{{Verb: "watch", Namespace: "default", Resource: "pods"}}},
		{"list of nodes", "/api/v1/nodes", false, []kubeapi.Access{{Verb: "list", Resource: "nodes"}}},
		{"get of a pod not held", "/api/v1/namespaces/default/pods/other", false,
			[]kubeapi.Access{{Verb: "get", Namespace: "default", Resource: "pods", Name: "other"}}},
		{"get of another node", "/api/v1/nodes/node-2", false, []kubeapi.Access{{Verb: "get", Resource: "nodes", Name: "node-2"}}},
		{"get of a namespace not held", "/api/v1/namespaces/other", false,
			[]kubeapi.Access{{Verb: "get", Namespace: "other", Resource: "namespaces", Name: "other"}}},
		{"list of pods pinned", "/api/v1/pods?fieldSelector=" + pinned, true,
			[]kubeapi.Access{{Verb: "list", Resource: "pods", FieldSelector: pinned}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", tt.target, nil)
			if _, ok := full.Local(r); ok != tt.full {
				t.Errorf("full view: local %v, want %v", ok, tt.full)
			}
			if got, ok := view.Local(r); !ok || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("node view: Local = %+v, %v; want %+v", got, ok, tt.want)
			}
		})
	}

	cs := serve(t, view).clientset(t, "application/vnd.kubernetes.protobuf")
	ctx := context.Background()
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 2 {
		t.Fatalf("pods of the node view: %v %+v", err, pods)
	}
	nl, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nl.Items) != 1 || nl.Items[0].Name != node {
		t.Fatalf("nodes of the node view: %v %+v", err, nl)
	}
	w, err := cs.CoreV1().Pods("kube-system").Watch(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if ev := next(t, w); ev.Type != watch.Added || ev.Object.(*corev1.Pod).Name != "agent" {
		t.Fatalf("first event %s %+v, want ADDED agent", ev.Type, ev.Object)
	}
	if ev := next(t, w); ev.Type != watch.Bookmark {
		t.Fatalf("second event %s, want the initial events' BOOKMARK", ev.Type)
	}
	if _, err := cs.CoreV1().Nodes().Get(ctx, "node-2", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get of another node in the node view: %v", err)
	}
}
