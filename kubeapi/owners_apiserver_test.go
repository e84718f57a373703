package kubeapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	batchv1client "k8s.io/client-go/kubernetes/typed/batch/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/podsapi/podsapi/kindstore"
	"github.com/podsapi/podsapi/kubeapi"
	"github.com/podsapi/podsapi/test/kubetest"
	"github.com/podsapi/podsapi/test/podstest"
)

// ownerKind is one owner kind of TestAPIServerOwners: where its objects
// are, the ones it gets, and its table's cells that depend on the time of
// the answer.
type ownerKind struct {
	gvr schema.GroupVersionResource
	// namespace and name are an object of the kind; app is its label
	// app=<app>.
	namespace, name, app string
	// ages are the indices of the time-dependent cells of its table row
	// (AGE; a Job's DURATION; a CronJob's LAST SCHEDULE).
	ages []int
	// field is a field selector the kind's conversion accepts beyond the
	// metadata's ("" for none), and unsupported one it refuses.
	field, unsupported string
}

// path returns the path of the kind's collection in namespace ns ("" for
// every namespace), and of the object name when not "".
func (k ownerKind) path(ns, name string) string {
	p := "/apis/" + k.gvr.GroupVersion().String()
	if ns != "" {
		p += "/namespaces/" + ns
	}
	p += "/" + k.gvr.Resource
	if name != "" {
		p += "/" + name
	}
	return p
}

// ownerTemplate is the pod template of the owner objects, labelled
// app=<app>.
func ownerTemplate(app string, restart corev1.RestartPolicy) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{RestartPolicy: restart, Containers: []corev1.Container{
			{Name: "app", Image: "registry.k8s.io/pause:3.10"}, {Name: "sidecar", Image: "registry.k8s.io/pause:3.9"},
		}},
	}
}

// createOwners creates, in the API server, objects of the six owner kinds
// in the namespaces default and other, with statuses as their controllers
// would write them (no controller runs), so that every table cell has a
// value.
func createOwners(t *testing.T, admin kubernetes.Interface) {
	t.Helper()
	ctx := t.Context()
	cs := struct {
		apps  appsv1client.AppsV1Interface
		batch batchv1client.BatchV1Interface
	}{admin.AppsV1(), admin.BatchV1()}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	meta := func(ns, name, app string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app, "tier": "x"}}
	}
	sel := func(app string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "track", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"canary"}}}}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, rs := range []*appsv1.ReplicaSet{
		{ObjectMeta: meta("default", "web-1", "web"), Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3), Selector: sel("web"), Template: ownerTemplate("web", "")}},
		{ObjectMeta: meta("other", "db-1", "db"), Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1), Selector: sel("db"), Template: ownerTemplate("db", "")}},
	} {
		got, err := cs.apps.ReplicaSets(rs.Namespace).Create(ctx, rs, metav1.CreateOptions{})
		must(err)
		got.Status = appsv1.ReplicaSetStatus{Replicas: 2, ReadyReplicas: 1, AvailableReplicas: 1, FullyLabeledReplicas: 2}
		_, err = cs.apps.ReplicaSets(rs.Namespace).UpdateStatus(ctx, got, metav1.UpdateOptions{})
		must(err)
	}
	d, err := cs.apps.Deployments("default").Create(ctx, &appsv1.Deployment{ObjectMeta: meta("default", "web", "web"),
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: sel("web"), Template: ownerTemplate("web", "")}}, metav1.CreateOptions{})
	must(err)
	d.Status = appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1}
	_, err = cs.apps.Deployments("default").UpdateStatus(ctx, d, metav1.UpdateOptions{})
	must(err)
	ss, err := cs.apps.StatefulSets("other").Create(ctx, &appsv1.StatefulSet{ObjectMeta: meta("other", "db", "db"),
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), Selector: sel("db"), Template: ownerTemplate("db", "")}}, metav1.CreateOptions{})
	must(err)
	ss.Status = appsv1.StatefulSetStatus{Replicas: 2, ReadyReplicas: 1}
	_, err = cs.apps.StatefulSets("other").UpdateStatus(ctx, ss, metav1.UpdateOptions{})
	must(err)
	dsTemplate := ownerTemplate("agent", "")
	dsTemplate.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux", "disk": "ssd"}
	ds, err := cs.apps.DaemonSets("other").Create(ctx, &appsv1.DaemonSet{ObjectMeta: meta("other", "agent", "agent"),
		Spec: appsv1.DaemonSetSpec{Selector: sel("agent"), Template: dsTemplate}}, metav1.CreateOptions{})
	must(err)
	ds.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, NumberReady: 2, UpdatedNumberScheduled: 3, NumberAvailable: 2}
	_, err = cs.apps.DaemonSets("other").UpdateStatus(ctx, ds, metav1.UpdateOptions{})
	must(err)
	job, err := cs.batch.Jobs("default").Create(ctx, &batchv1.Job{ObjectMeta: meta("default", "backup", "batch"),
		Spec: batchv1.JobSpec{Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](1), Template: ownerTemplate("batch", corev1.RestartPolicyNever)}}, metav1.CreateOptions{})
	must(err)
	job.Status = batchv1.JobStatus{StartTime: ptr.To(metav1.Unix(time.Now().Add(-time.Minute).Unix(), 0)), Succeeded: 1}
	_, err = cs.batch.Jobs("default").UpdateStatus(ctx, job, metav1.UpdateOptions{})
	must(err)
	_, err = cs.batch.Jobs("other").Create(ctx, &batchv1.Job{ObjectMeta: meta("other", "migrate", "batch"),
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: ownerTemplate("batch", corev1.RestartPolicyOnFailure)}}, metav1.CreateOptions{})
	must(err)
	cj, err := cs.batch.CronJobs("default").Create(ctx, &batchv1.CronJob{ObjectMeta: meta("default", "nightly", "batch"),
		Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *", TimeZone: ptr.To("Etc/UTC"), Suspend: ptr.To(false),
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: ownerTemplate("batch", corev1.RestartPolicyNever)}}}}, metav1.CreateOptions{})
	must(err)
	cj.Status = batchv1.CronJobStatus{LastScheduleTime: ptr.To(metav1.Unix(time.Now().Add(-2*time.Hour).Unix(), 0))}
	_, err = cs.batch.CronJobs("default").UpdateStatus(ctx, cj, metav1.UpdateOptions{})
	must(err)
}

// feedOwners feeds kind stores of the six owner kinds from informers of
// the API server, as the door does, until the test ends, and returns the
// options that serve them once every store has synced.
func feedOwners(t *testing.T, cp *kubetest.ControlPlane) []kubeapi.Option {
	t.Helper()
	factory := informers.NewSharedInformerFactory(cp.Admin, 0)
	type fed interface {
		kubeapi.PodReader
		cache.ResourceEventHandler
		MarkSynced()
	}
	stores := []struct {
		gvr   schema.GroupVersionResource
		store fed
		inf   cache.SharedIndexInformer
	}{
		{replicaSetsGVR, kindstore.NewReplicaSets(), factory.Apps().V1().ReplicaSets().Informer()},
		{deploymentsGVR, kindstore.NewDeployments(), factory.Apps().V1().Deployments().Informer()},
		{statefulSetsGVR, kindstore.NewStatefulSets(), factory.Apps().V1().StatefulSets().Informer()},
		{daemonSetsGVR, kindstore.NewDaemonSets(), factory.Apps().V1().DaemonSets().Informer()},
		{jobsGVR, kindstore.NewJobs(), factory.Batch().V1().Jobs().Informer()},
		{cronJobsGVR, kindstore.NewCronJobs(), factory.Batch().V1().CronJobs().Informer()},
	}
	var opts []kubeapi.Option
	for _, s := range stores {
		if _, err := s.inf.AddEventHandler(s.store); err != nil {
			t.Fatal(err)
		}
		opts = append(opts, kubeapi.WithResource(s.gvr, s.store))
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	for _, s := range stores {
		if !cache.WaitForCacheSync(t.Context().Done(), s.inf.HasSynced) {
			t.Fatalf("the informer of %s did not sync", s.gvr.Resource)
		}
		s.store.MarkSynced()
	}
	return opts
}

// TestAPIServerOwners asks a real kube-apiserver (v1.37.2 on etcd) and the
// handler, whose stores of the six owner kinds (ReplicaSets, Deployments,
// StatefulSets, DaemonSets, Jobs, CronJobs) client-go informers of it
// feed, the same requests with the same client, and checks they agree:
// lists and gets in JSON and protobuf, PartialObjectMetadata[List] (v1 and
// v1beta1, JSON and protobuf), Tables (every column, wide ones included,
// and the object or none), label selectors and the field selectors each
// kind's conversion accepts, the 400 of one it refuses, the 404 of an
// absent name, the 406s of a list's and an object's forms asked of the
// other; then that a watch with sendInitialEvents and bookmarks (JSON, by
// the dynamic client; protobuf, by the metadata client) sends the same
// initial objects, the same end-of-initial-events bookmark, and the same
// change.
func TestAPIServerOwners(t *testing.T) {
	cp := kubetest.Start(t)
	createOwners(t, cp.Admin)
	s := serve(t, handler(newStore(), feedOwners(t, cp)...))
	servers := map[string]*rest.Config{"API server": cp.AdminConfig, "podsapi": s.config("")}

	kinds := []ownerKind{
		{gvr: replicaSetsGVR, namespace: "default", name: "web-1", app: "web", ages: []int{4}, unsupported: "status.replicas"},
		{gvr: deploymentsGVR, namespace: "default", name: "web", app: "web", ages: []int{4}, unsupported: "spec.replicas"},
		{gvr: statefulSetsGVR, namespace: "other", name: "db", app: "db", ages: []int{2}, unsupported: "status.replicas"},
		{gvr: daemonSetsGVR, namespace: "other", name: "agent", app: "agent", ages: []int{7}, unsupported: "spec.updateStrategy.type"},
		{gvr: jobsGVR, namespace: "default", name: "backup", app: "batch", ages: []int{3, 4}, field: "status.successful=1", unsupported: "status.active"},
		{gvr: cronJobsGVR, namespace: "default", name: "nightly", app: "batch", ages: []int{5, 6}, unsupported: "spec.suspend"},
	}
	const (
		protobufType  = "application/vnd.kubernetes.protobuf"
		pomJSON       = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
		pomListJSON   = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
		pomProto      = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
		pomListPBeta  = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1"
		tableJSON     = "application/json;as=Table;g=meta.k8s.io;v=v1"
		kubectlAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
	)
	for _, k := range kinds {
		list, inNS, get := k.path("", ""), k.path(k.namespace, ""), k.path(k.namespace, k.name)
		type decodeFunc func(t *testing.T, body []byte) []byte
		typed := func(t *testing.T, body []byte) []byte {
			return decodedAsJSON(t, scheme.Codecs.UniversalDeserializer(), body, nil)
		}
		meta := func(t *testing.T, body []byte) []byte {
			if bytes.Contains(body[:min(len(body), 64)], []byte("PartialObjectMetadataList")) {
				return protobufAsJSON(t, body, &metav1.PartialObjectMetadataList{})
			}
			return protobufAsJSON(t, body, &metav1.PartialObjectMetadata{})
		}
		cases := []struct {
			name, target, accept string
			// decode turns a protobuf body into JSON; nil for JSON.
			decode decodeFunc
			// exact compares the bodies byte for byte (errors).
			exact bool
		}{
			{name: "list", target: list},
			{name: "list in a namespace by label", target: inNS + "?labelSelector=app%3D" + k.app + ",tier+in+(x,y)"},
			{name: "list by name and namespace", target: list + "?fieldSelector=metadata.name%3D" + k.name + ",metadata.namespace%3D" + k.namespace},
			{name: "list by name, none", target: inNS + "?fieldSelector=metadata.name%21%3D" + k.name + ",metadata.name%3Dnone"},
			{name: "get", target: get},
			{name: "list protobuf", target: list, accept: protobufType, decode: typed},
			{name: "get protobuf", target: get, accept: protobufType, decode: typed},
			{name: "metadata list", target: list, accept: pomListJSON},
			{name: "metadata list protobuf v1beta1", target: inNS, accept: pomListPBeta, decode: meta},
			{name: "metadata get", target: get, accept: pomJSON},
			{name: "metadata get protobuf", target: get, accept: pomProto, decode: meta},
			{name: "table list", target: list, accept: kubectlAccept},
			{name: "table list includeObject=Object", target: inNS + "?includeObject=Object", accept: tableJSON},
			{name: "table get includeObject=None", target: get + "?includeObject=None", accept: tableJSON},
			{name: "unsupported field label", target: list + "?fieldSelector=" + k.unsupported + "%3D1", exact: true},
			{name: "absent", target: k.path(k.namespace, "absent"), exact: true},
			{name: "metadata of a list", target: list, accept: pomJSON, exact: true},
			{name: "metadata list of a get", target: get, accept: pomListJSON, exact: true},
		}
		if k.field != "" {
			cases = append(cases, struct {
				name, target, accept string
				decode               decodeFunc
				exact                bool
			}{name: "list by " + k.field, target: list + "?fieldSelector=" + strings.ReplaceAll(k.field, "=", "%3D")})
		}
		for _, c := range cases {
			t.Run(k.gvr.Resource+"/"+c.name, func(t *testing.T) {
				answers := map[string]rawAnswer{}
				for name, cfg := range servers {
					answers[name] = rawAccept(t, cfg, c.target, c.accept)
				}
				want, got := answers["API server"], answers["podsapi"]
				if want.code != got.code || want.contentType != got.contentType {
					t.Fatalf("API server %d %s %s\npodsapi %d %s %s", want.code, want.contentType, want.body, got.code, got.contentType, got.body)
				}
				if c.exact {
					if !bytes.Equal(bytes.TrimSpace(want.body), bytes.TrimSpace(got.body)) {
						t.Errorf("bodies differ:\nAPI server %s\npodsapi    %s", want.body, got.body)
					}
					return
				}
				wb, gb := want.body, got.body
				if c.decode != nil {
					wb, gb = c.decode(t, wb), c.decode(t, gb)
				}
				w, g := comparableAt(t, wb, k.ages...), comparableAt(t, gb, k.ages...)
				if !reflect.DeepEqual(w, g) {
					wj, _ := json.Marshal(w)
					gj, _ := json.Marshal(g)
					t.Errorf("bodies differ (but for resourceVersions, managed fields and times):\nAPI server %s\npodsapi    %s", wj, gj)
				}
				if !bytes.Contains(gb, []byte(`"`+k.name+`"`)) && !strings.Contains(c.name, "none") {
					t.Errorf("podsapi's answer does not hold %s: %s", k.name, gb)
				}
			})
		}
	}

	for _, k := range kinds {
		t.Run(k.gvr.Resource+"/table watch", func(t *testing.T) { tableWatchesAgree(t, cp, s, k) })
		t.Run(k.gvr.Resource+"/watch", func(t *testing.T) { watchesAgree(t, cp, s, k) })
	}
}

// tableWatchesAgree opens, on the API server and on the handler, a watch
// of Tables (kubectl get -w's form, in JSON) of the kind k's objects with
// sendInitialEvents and bookmarks, and checks both send the same events
// up to the bookmark that ends the initial ones: the same rows, the first
// with the column definitions, the bookmark's row of an empty object.
func tableWatchesAgree(t *testing.T, cp *kubetest.ControlPlane, s *served, k ownerKind) {
	target := k.path("", "") + "?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&labelSelector=tier%3Dx"
	events := map[string][]any{}
	for server, cfg := range map[string]*rest.Config{"API server": cp.AdminConfig, "podsapi": s.config("")} {
		for _, line := range streamUntil(t, cfg, target, "application/json;as=Table;g=meta.k8s.io;v=v1", `"type":"BOOKMARK"`) {
			events[server] = append(events[server], comparableAt(t, line, k.ages...))
		}
	}
	if want, got := events["API server"], events["podsapi"]; !reflect.DeepEqual(want, got) || len(got) < 2 {
		wj, _ := json.Marshal(want)
		gj, _ := json.Marshal(got)
		t.Errorf("table watch events differ (but for resourceVersions, managed fields and times):\nAPI server %s\npodsapi    %s", wj, gj)
	}
}

// streamUntil sends a GET of target with cfg's credentials and the Accept
// header accept, and returns the lines of its answer up to the first that
// contains last, failing the test at its deadline.
func streamUntil(t *testing.T, cfg *rest.Config, target, accept, last string) [][]byte {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d", target, resp.StatusCode)
	}
	lines := make(chan []byte)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			select {
			case lines <- bytes.Clone(sc.Bytes()):
			case <-ctx.Done():
				return
			}
		}
	}()
	deadline, stop := podstest.NearDeadline(t)
	defer stop()
	var out [][]byte
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("%s: the stream ended after %q", target, out)
			}
			out = append(out, l)
			if bytes.Contains(l, []byte(last)) {
				return out
			}
		case <-deadline:
			t.Fatalf("%s: no %s after %q", target, last, out)
		}
	}
}

// watchesAgree opens, on the API server and on the handler, a watch of the
// kind k's objects with sendInitialEvents and bookmarks, in JSON (the
// dynamic client) and in protobuf (the metadata client), and checks both
// send the same initial objects, then the bookmark that ends them, then a
// change of k's object, labelled anew.
func watchesAgree(t *testing.T, cp *kubetest.ControlPlane, s *served, k ownerKind) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	opts := metav1.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, LabelSelector: "tier=x"}
	type opened struct{ server, form string }
	watches := map[opened]watch.Interface{}
	for server, cfg := range map[string]*rest.Config{"API server": cp.AdminConfig, "podsapi": s.config("")} {
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		md, err := metadata.NewForConfig(metadata.ConfigFor(cfg))
		if err != nil {
			t.Fatal(err)
		}
		for form, open := range map[string]func() (watch.Interface, error){
			"json":     func() (watch.Interface, error) { return dyn.Resource(k.gvr).Watch(ctx, opts) },
			"protobuf": func() (watch.Interface, error) { return md.Resource(k.gvr).Watch(ctx, opts) },
		} {
			w, err := open()
			if err != nil {
				t.Fatalf("%s, %s: %v", server, form, err)
			}
			defer w.Stop()
			watches[opened{server, form}] = w
		}
	}
	// The initial events: every object, then the bookmark that ends them.
	initial := map[opened][]string{}
	for o, w := range watches {
		for {
			ev := nextEvent(t, w)
			m := metaOf(t, ev.Object)
			if ev.Type == watch.Bookmark {
				if m.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" {
					continue
				}
				initial[o] = append(initial[o], "BOOKMARK "+metav1.InitialEventsAnnotationKey)
				break
			}
			initial[o] = append(initial[o], string(ev.Type)+" "+m.GetNamespace()+"/"+m.GetName()+" app="+m.GetLabels()["app"])
		}
	}
	for _, form := range []string{"json", "protobuf"} {
		want, got := initial[opened{"API server", form}], initial[opened{"podsapi", form}]
		slices.Sort(want)
		slices.Sort(got)
		if !reflect.DeepEqual(want, got) || len(got) < 2 {
			t.Errorf("%s: initial events\nAPI server %q\npodsapi    %q", form, want, got)
		}
	}
	// A change of k's object reaches every watch.
	dyn, err := dynamic.NewForConfig(cp.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"metadata":{"labels":{"changed":"yes"}}}`)
	if _, err := dyn.Resource(k.gvr).Namespace(k.namespace).Patch(ctx, k.name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	for o, w := range watches {
		for {
			ev := nextEvent(t, w)
			if ev.Type == watch.Bookmark {
				continue
			}
			m := metaOf(t, ev.Object)
			if ev.Type != watch.Modified || m.GetName() != k.name || m.GetLabels()["changed"] != "yes" {
				t.Errorf("%s, %s: %s %s/%s %v, want MODIFIED %s changed=yes", o.server, o.form, ev.Type, m.GetNamespace(), m.GetName(), m.GetLabels(), k.name)
			}
			break
		}
	}
}

// nextEvent returns the next event of w, failing the test at its deadline
// or on an ERROR.
func nextEvent(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	ev := next(t, w)
	if ev.Type == watch.Error {
		t.Fatalf("watch error: %+v", ev.Object)
	}
	return ev
}

// metaOf returns the object metadata of a watch event's object.
func metaOf(t *testing.T, obj any) metav1.Object {
	t.Helper()
	m, ok := obj.(metav1.Object)
	if !ok {
		t.Fatalf("an event's object %T has no metadata", obj)
	}
	return m
}
