package fuzz_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/podsapi/podsapi/kindstore"
	"github.com/podsapi/podsapi/kubeapi"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// node is the node of podstest.Pod's pods.
const node = "node-1"

// FuzzServeHTTP sends the handler arbitrary targets and Accept headers: it
// never panics, Local never panics either, and every answer but a 200 is a
// metav1.Status in JSON with the status code it carries.
func FuzzServeHTTP(f *testing.F) {
	for _, seed := range []string{
		"/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1",
		"/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1&watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan",
		"/api/v1/namespaces/default/pods?fieldSelector=spec.nodeName%3Dnode-1&limit=1&continue=eyJydiI6IngifQ",
		"/api/v1/namespaces/default/pods/web-1",
		"/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1&labelSelector=a+in+(&resourceVersion=x",
		"/pods", "/api", "/version",
		"/apis/apps/v1/namespaces/default/replicasets/web-1",
		"/apis/batch/v1/jobs?fieldSelector=status.successful%3D1&watch=1&sendInitialEvents=true&allowWatchBookmarks=true",
		"/apis/apps/v1/daemonsets?labelSelector=app&fieldSelector=spec.x%3D1",
		"/api/v1/nodes?watch=true",
	} {
		f.Add(seed, "application/json")
		f.Add(seed, "application/vnd.kubernetes.protobuf;stream=watch, */*;q=0.1")
	}
	st := store.New()
	st.Upsert(podstest.Pod("default", "web-1", 1))
	st.Upsert(podstest.Pod("kube-system", "dns-1", 2))
	st.MarkSynced()
	// The full view of the pods, and the node view of the pods, the
	// namespaces, the node and the owner kinds.
	hs := []*kubeapi.Handler{kubeapi.New(st, node), kubeapi.New(st, node, append(kinds(), kubeapi.WithNodeView())...)}
	f.Fuzz(func(t *testing.T, target, accept string) {
		for _, h := range hs {
			serveFuzzed(t, h, target, accept)
		}
	})
}

// serveFuzzed sends h a GET of target with the Accept header accept, and
// checks its answer is a 200 or a Status.
func serveFuzzed(t *testing.T, h *kubeapi.Handler, target, accept string) {
	t.Helper()
	if !strings.HasPrefix(target, "/") {
		target = "/" + target
	}
	req, err := http.NewRequest(http.MethodGet, "http://node"+target, nil)
	if err != nil {
		return
	}
	req.Header.Set("Accept", accept)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a watch ends after its first events
	req = req.WithContext(ctx)
	h.Local(req)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code == http.StatusOK {
		return
	}
	var status metav1.Status
	if err := json.Unmarshal(w.Body.Bytes(), &status); err != nil && w.Header().Get("Content-Type") == "application/json" {
		t.Fatalf("%s: %d with a body that is not a Status: %q", target, w.Code, w.Body.Bytes())
	}
	if w.Header().Get("Content-Type") == "application/json" && (status.Kind != "Status" || int(status.Code) != w.Code) {
		t.Fatalf("%s: %d with %+v", target, w.Code, status)
	}
}

// kinds returns the options that serve synced stores of namespaces, of the
// node and of the six owner kinds, each holding one object (an owner in the
// namespace default, named web).
func kinds() []kubeapi.Option {
	owner := metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web", ResourceVersion: "5", Labels: map[string]string{"app": "web"}}
	nss, nodes := kindstore.NewNamespaces(), kindstore.NewNodes()
	nss.OnAdd(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "uid-default", ResourceVersion: "3"}}, true)
	nodes.OnAdd(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "uid-node", ResourceVersion: "4"}}, true)
	nss.MarkSynced()
	nodes.MarkSynced()
	opts := []kubeapi.Option{kubeapi.WithNamespaces(nss), kubeapi.WithNode(nodes)}
	// add serves s, which holds its object, as gvr, synced.
	add := func(gvr schema.GroupVersionResource, s interface {
		kubeapi.PodReader
		MarkSynced()
	}) {
		s.MarkSynced()
		opts = append(opts, kubeapi.WithResource(gvr, s))
	}
	rs, deps, sts := kindstore.NewReplicaSets(), kindstore.NewDeployments(), kindstore.NewStatefulSets()
	dss, jobs, cjs := kindstore.NewDaemonSets(), kindstore.NewJobs(), kindstore.NewCronJobs()
	rs.OnAdd(&appsv1.ReplicaSet{ObjectMeta: owner}, true)
	deps.OnAdd(&appsv1.Deployment{ObjectMeta: owner}, true)
	sts.OnAdd(&appsv1.StatefulSet{ObjectMeta: owner}, true)
	dss.OnAdd(&appsv1.DaemonSet{ObjectMeta: owner}, true)
	jobs.OnAdd(&batchv1.Job{ObjectMeta: owner, Status: batchv1.JobStatus{Succeeded: 1}}, true)
	cjs.OnAdd(&batchv1.CronJob{ObjectMeta: owner, Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *"}}, true)
	apps, batch := appsv1.SchemeGroupVersion, batchv1.SchemeGroupVersion
	add(apps.WithResource("replicasets"), rs)
	add(apps.WithResource("deployments"), deps)
	add(apps.WithResource("statefulsets"), sts)
	add(apps.WithResource("daemonsets"), dss)
	add(batch.WithResource("jobs"), jobs)
	add(batch.WithResource("cronjobs"), cjs)
	return opts
}
