package workload_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/podsapi/podsapi/workload"
)

// objectAnswers is a workload.Getter for the tests that run on synctest's
// clock, where no API server can run (a connection to one is never durably
// blocked, so the bubble's clock would never advance): it answers the
// objects it holds, by resource, namespace and name, as the API server's get
// does (NotFound for the others), and fails every get while down, as an API
// server stopped does. The same behaviour against a real kube-apiserver is
// tested on the real clock (TestSliceAPIServer).
type objectAnswers struct {
	mu      sync.Mutex
	objects map[string]workload.Object
	down    bool
	gets    int
}

func objectKey(resource, namespace, name string) string {
	return resource + "/" + namespace + "/" + name
}

func (o *objectAnswers) Get(_ context.Context, resource schema.GroupVersionResource, namespace, name string) (workload.Object, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.gets++
	if o.down {
		return nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
	}
	obj, ok := o.objects[objectKey(resource.Resource, namespace, name)]
	if !ok {
		return nil, apierrors.NewNotFound(resource.GroupResource(), name)
	}
	return obj.DeepCopyObject().(workload.Object), nil
}

// put holds obj as the answer about resource: a new object, or a change
// (the caller bumps its resourceVersion, as the API server would).
func (o *objectAnswers) put(resource string, obj workload.Object) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.objects == nil {
		o.objects = map[string]workload.Object{}
	}
	o.objects[objectKey(resource, obj.GetNamespace(), obj.GetName())] = obj
}

func (o *objectAnswers) setDown(down bool) {
	o.mu.Lock()
	o.down = down
	o.mu.Unlock()
}

func (o *objectAnswers) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.gets
}

// recorder records, as "ADDED ReplicaSet shop/web-1 (rv 1)", the events an
// event handler of the node's slice is told, for every resource of the
// slice.
type recorder struct {
	mu     sync.Mutex
	events []string
	// last is the last object told of each, by "Kind namespace/name".
	last map[string]workload.Object
}

func (rec *recorder) handler(kind string) cache.ResourceEventHandler {
	note := func(typ string, obj any) {
		o := obj.(workload.Object)
		name := o.GetName()
		if o.GetNamespace() != "" {
			name = o.GetNamespace() + "/" + name
		}
		rec.mu.Lock()
		rec.events = append(rec.events, fmt.Sprintf("%s %s %s (rv %s)", typ, kind, name, o.GetResourceVersion()))
		if rec.last == nil {
			rec.last = map[string]workload.Object{}
		}
		rec.last[kind+" "+name] = o
		rec.mu.Unlock()
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { note("ADDED", obj) },
		UpdateFunc: func(_, obj any) { note("MODIFIED", obj) },
		DeleteFunc: func(obj any) { note("DELETED", obj) },
	}
}

// record registers rec for every resource of the slice of r.
func (rec *recorder) record(t *testing.T, r *workload.Resolver) {
	for _, res := range workload.SliceResources() {
		kind := map[string]string{
			"replicasets": "ReplicaSet", "deployments": "Deployment", "statefulsets": "StatefulSet", "daemonsets": "DaemonSet",
			"jobs": "Job", "cronjobs": "CronJob", "namespaces": "Namespace",
		}[res.Resource]
		t.Cleanup(r.AddEventHandler(res, rec.handler(kind)))
	}
}

// take returns the events recorded since the last take, sorted: the events
// of one answer or one pod come in no particular order between objects.
func (rec *recorder) take() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := rec.events
	rec.events = nil
	slices.Sort(out)
	return out
}

// object returns the last object told of "Kind namespace/name".
func (rec *recorder) object(name string) workload.Object {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.last[name]
}

// await waits, on the real clock, until the events told since the last
// take are want, their resourceVersions aside, and fails the test when
// others come, or want has not come within 60 s.
func (rec *recorder) await(t *testing.T, what string, want ...string) {
	t.Helper()
	slices.Sort(want)
	var seen []string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		for _, ev := range rec.take() {
			seen = append(seen, ev[:strings.LastIndex(ev, " (rv ")])
		}
		slices.Sort(seen)
		if slices.Equal(seen, want) {
			return
		}
		if len(seen) > len(want) || time.Now().After(deadline) {
			t.Fatalf("%s: events\n\t%s\nwant\n\t%s", what, strings.Join(seen, "\n\t"), strings.Join(want, "\n\t"))
		}
	}
}

func (rec *recorder) expect(t *testing.T, what string, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := rec.take(); !slices.Equal(got, want) {
		t.Errorf("%s: events\n\t%s\nwant\n\t%s", what, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

func meta(ns, name, rv string, uid types.UID, owners []metav1.OwnerReference) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv, UID: uid, OwnerReferences: owners}
}

// slicePod returns a pod of the node in ns owned by owners.
func slicePod(ns, name string, uid types.UID, labels map[string]string, owners []metav1.OwnerReference) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid, Labels: labels, OwnerReferences: owners}, Spec: corev1.PodSpec{NodeName: "node-1"}}
}

// TestSlice keeps, on synctest's clock, the node's slice of pods of every
// kind of owner: an object is ADDED when the API server first answers it
// after its first pod lands, MODIFIED when a refresh finds another
// resourceVersion (at the refresh interval), DELETED when its last pod
// leaves (a Deployment with its last ReplicaSet), kept as it was while the
// API server is unreachable (Age growing), and followed again once it is
// back.
func TestSlice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const refresh = 10 * time.Minute
		api := &objectAnswers{}
		api.put("namespaces", &corev1.Namespace{ObjectMeta: meta("", "shop", "1", "uid-ns-shop", nil)})
		api.put("namespaces", &corev1.Namespace{ObjectMeta: meta("", "ops", "1", "uid-ns-ops", nil)})
		api.put("deployments", &appsv1.Deployment{ObjectMeta: meta("shop", "web", "1", "uid-web", nil)})
		api.put("replicasets", &appsv1.ReplicaSet{ObjectMeta: meta("shop", "web-1111", "1", "uid-web-1111", controller("apps/v1", "Deployment", "web", "uid-web"))})
		api.put("statefulsets", &appsv1.StatefulSet{ObjectMeta: meta("shop", "cache", "1", "uid-cache", nil)})
		api.put("daemonsets", &appsv1.DaemonSet{ObjectMeta: meta("ops", "agent", "1", "uid-agent", nil)})
		api.put("cronjobs", &batchv1.CronJob{ObjectMeta: meta("ops", "backup", "1", "uid-backup", nil)})
		api.put("jobs", &batchv1.Job{ObjectMeta: meta("ops", "backup-29412345", "1", "uid-backup-29412345", controller("batch/v1", "CronJob", "backup", "uid-backup"))})

		r := workload.NewResolver(workload.WithGetter(api), workload.WithSlice(), workload.WithRefreshInterval(refresh),
			workload.WithRetryInterval(time.Minute), workload.WithStaleAfter(time.Hour))
		rec := &recorder{}
		rec.record(t, r)
		run(t, r)

		webA := slicePod("shop", "web-1111-a", "pod-web-a", map[string]string{"pod-template-hash": "1111"}, controller("apps/v1", "ReplicaSet", "web-1111", "uid-web-1111"))
		webB := slicePod("shop", "web-1111-b", "pod-web-b", map[string]string{"pod-template-hash": "1111"}, controller("apps/v1", "ReplicaSet", "web-1111", "uid-web-1111"))
		cache0 := slicePod("shop", "cache-0", "pod-cache-0", nil, controller("apps/v1", "StatefulSet", "cache", "uid-cache"))
		agent := slicePod("ops", "agent-x", "pod-agent", nil, controller("apps/v1", "DaemonSet", "agent", "uid-agent"))
		backup := slicePod("ops", "backup-29412345-q", "pod-backup", nil, controller("batch/v1", "Job", "backup-29412345", "uid-backup-29412345"))
		debug := slicePod("shop", "debug", "pod-debug", nil, nil)
		sink := r.Sink(discard{})
		for _, p := range []*corev1.Pod{webA, webB, cache0, agent, backup, debug} {
			sink.Upsert(p)
		}
		if r.HasSynced() {
			t.Error("HasSynced before the pod source synced")
		}
		sink.MarkSynced()
		synctest.Wait()
		if !r.HasSynced() {
			t.Error("not HasSynced once every object was asked about")
		}
		rec.expect(t, "the pods land",
			"ADDED Namespace shop (rv 1)", "ADDED Namespace ops (rv 1)",
			"ADDED ReplicaSet shop/web-1111 (rv 1)", "ADDED Deployment shop/web (rv 1)",
			"ADDED StatefulSet shop/cache (rv 1)", "ADDED DaemonSet ops/agent (rv 1)",
			"ADDED Job ops/backup-29412345 (rv 1)", "ADDED CronJob ops/backup (rv 1)")
		// One get per object, none per pod.
		if got := api.count(); got != 8 {
			t.Errorf("%d gets, want 8: one per object of the slice", got)
		}
		want(t, r, backup, workload.Workload{Kind: workload.KindCronJob, Name: "backup", Resolution: workload.Resolved})

		// A handler registered now is told what is held, as an
		// informer's initial list.
		late := &recorder{}
		late.record(t, r)
		if got := len(late.take()); got != 8 {
			t.Errorf("a handler added late was told %d objects, want the 8 held", got)
		}

		start := time.Now()
		api.put("deployments", &appsv1.Deployment{ObjectMeta: meta("shop", "web", "2", "uid-web", nil)})
		api.put("namespaces", &corev1.Namespace{ObjectMeta: meta("", "ops", "2", "uid-ns-ops", nil)})
		time.Sleep(refresh - time.Second)
		rec.expect(t, "before the refresh")
		time.Sleep(time.Second)
		synctest.Wait()
		rec.expect(t, "at the refresh", "MODIFIED Deployment shop/web (rv 2)", "MODIFIED Namespace ops (rv 2)")
		if d := time.Since(start); d != refresh {
			t.Errorf("changes told after %v, want the refresh interval %v", d, refresh)
		}

		sink.Delete(webA.UID)
		synctest.Wait()
		rec.expect(t, "one of two pods of a ReplicaSet leaves")
		sink.Delete(webB.UID)
		synctest.Wait()
		rec.expect(t, "the last pod of a ReplicaSet leaves", "DELETED ReplicaSet shop/web-1111 (rv 1)", "DELETED Deployment shop/web (rv 2)")

		// The API server unreachable: nothing is told, what is held is
		// kept, and Age says how old it is.
		api.setDown(true)
		time.Sleep(3 * refresh)
		synctest.Wait()
		rec.expect(t, "the API server unreachable")
		if age := r.Age(); age < 3*refresh {
			t.Errorf("Age %v with the API server unreachable for %v, want at least that", age, 3*refresh)
		}
		if got := len(late.take()); got != 4 {
			t.Errorf("the late handler was told %d events, want the 2 changes and the 2 deletions", got)
		}
		// The CronJob's Job is gone meanwhile; its pod is still on the
		// node.
		api.mu.Lock()
		delete(api.objects, objectKey("jobs", "ops", "backup-29412345"))
		api.mu.Unlock()
		api.setDown(false)
		time.Sleep(refresh)
		synctest.Wait()
		rec.expect(t, "the API server back", "DELETED Job ops/backup-29412345 (rv 1)", "DELETED CronJob ops/backup (rv 1)")
		if age := r.Age(); age > refresh {
			t.Errorf("Age %v once the API server answers, want at most the refresh interval %v", age, refresh)
		}

		for _, p := range []*corev1.Pod{cache0, agent, backup, debug} {
			sink.Delete(p.UID)
		}
		synctest.Wait()
		rec.expect(t, "every pod gone",
			"DELETED StatefulSet shop/cache (rv 1)", "DELETED DaemonSet ops/agent (rv 1)",
			"DELETED Namespace shop (rv 1)", "DELETED Namespace ops (rv 2)")
	})
}

// TestSliceMaxOwners bounds the slice by WithMaxOwners, on synctest's
// clock: a ReplicaSet's Deployment with no room is not kept, and is once
// room frees.
func TestSliceMaxOwners(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := &objectAnswers{}
		api.put("namespaces", &corev1.Namespace{ObjectMeta: meta("", "shop", "1", "uid-ns-shop", nil)})
		api.put("deployments", &appsv1.Deployment{ObjectMeta: meta("shop", "web", "1", "uid-web", nil)})
		api.put("replicasets", &appsv1.ReplicaSet{ObjectMeta: meta("shop", "web-1111", "1", "uid-web-1111", controller("apps/v1", "Deployment", "web", "uid-web"))})
		api.put("statefulsets", &appsv1.StatefulSet{ObjectMeta: meta("shop", "cache", "1", "uid-cache", nil)})
		r := workload.NewResolver(workload.WithGetter(api), workload.WithSlice(), workload.WithMaxOwners(3))
		rec := &recorder{}
		rec.record(t, r)
		run(t, r)

		cache0 := slicePod("shop", "cache-0", "pod-cache-0", nil, controller("apps/v1", "StatefulSet", "cache", "uid-cache"))
		web := slicePod("shop", "web-1111-a", "pod-web-a", nil, controller("apps/v1", "ReplicaSet", "web-1111", "uid-web-1111"))
		r.Observe(cache0)
		r.Observe(web)
		synctest.Wait()
		rec.expect(t, "three places", "ADDED Namespace shop (rv 1)", "ADDED StatefulSet shop/cache (rv 1)", "ADDED ReplicaSet shop/web-1111 (rv 1)")
		r.Forget(cache0.UID)
		synctest.Wait()
		rec.expect(t, "a place freed", "DELETED StatefulSet shop/cache (rv 1)", "ADDED Deployment shop/web (rv 1)")
	})
}

// discard is a Sink that keeps nothing: the tests above read the
// Resolver only.
type discard struct{}

func (discard) Upsert(*corev1.Pod) {}
func (discard) Delete(types.UID)   {}
func (discard) MarkSynced()        {}

// storeNamespaces is a workload.NamespaceGetter on an informer's indexer,
// whose namespaces it answers as the full view's store does: decoded anew,
// without a resourceVersion.
type storeNamespaces struct{ indexer cache.Indexer }

func (s storeNamespaces) Get(_, name string) (*corev1.Namespace, bool, error) {
	obj, ok, err := s.indexer.GetByKey(name)
	if err != nil || !ok {
		return nil, ok, err
	}
	ns := obj.(*corev1.Namespace).DeepCopy()
	ns.ResourceVersion = ""
	return ns, true, nil
}

// TestSliceNamespacesFromInformer reads the namespaces of the slice from an
// informer's indexer, as the full view's store answers them (without a
// resourceVersion: a change is told by its contents), on synctest's clock:
// no get of a namespace, and a change the informer saw told at once
// (Recheck), not at the next refresh.
func TestSliceNamespacesFromInformer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
		if err := indexer.Add(&corev1.Namespace{ObjectMeta: meta("", "shop", "1", "uid-ns-shop", nil)}); err != nil {
			t.Fatal(err)
		}
		api := &objectAnswers{}
		api.put("statefulsets", &appsv1.StatefulSet{ObjectMeta: meta("shop", "cache", "1", "uid-cache", nil)})
		r := workload.NewResolver(workload.WithGetter(api), workload.WithSlice(), workload.WithNamespaces(storeNamespaces{indexer}))
		rec := &recorder{}
		rec.record(t, r)
		run(t, r)

		r.Observe(slicePod("shop", "cache-0", "pod-cache-0", nil, controller("apps/v1", "StatefulSet", "cache", "uid-cache")))
		synctest.Wait()
		rec.expect(t, "the pod lands", "ADDED Namespace shop (rv )", "ADDED StatefulSet shop/cache (rv 1)")
		if got := api.count(); got != 1 {
			t.Errorf("%d gets, want 1: the StatefulSet's, none of the namespace", got)
		}
		// Asked again without a change: nothing told.
		r.Recheck(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "", "shop")
		synctest.Wait()
		rec.expect(t, "the namespace unchanged")
		labelled := &corev1.Namespace{ObjectMeta: meta("", "shop", "2", "uid-ns-shop", nil)}
		labelled.Labels = map[string]string{"team": "web"}
		if err := indexer.Update(labelled); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		r.Recheck(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "", "shop")
		synctest.Wait()
		rec.expect(t, "the informer saw a change", "MODIFIED Namespace shop (rv )")
		if ns := rec.object("Namespace shop"); ns.GetLabels()["team"] != "web" {
			t.Errorf("labels %v, want team=web", ns.GetLabels())
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("told after %v, want at once", d)
		}
	})
}

// TestSlicePodMoves follows, on synctest's clock, a pod alone in its
// namespace that a rollout moves to its Deployment's new ReplicaSet: the old
// ReplicaSet is DELETED and the new one ADDED, with one get, while the
// namespace and the Deployment, which both versions of the pod hold, are
// neither deleted nor got again.
func TestSlicePodMoves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := &objectAnswers{}
		api.put("namespaces", &corev1.Namespace{ObjectMeta: meta("", "solo", "1", "uid-ns-solo", nil)})
		api.put("deployments", &appsv1.Deployment{ObjectMeta: meta("solo", "web", "1", "uid-web", nil)})
		api.put("replicasets", &appsv1.ReplicaSet{ObjectMeta: meta("solo", "web-1111", "1", "uid-web-1111", controller("apps/v1", "Deployment", "web", "uid-web"))})
		api.put("replicasets", &appsv1.ReplicaSet{ObjectMeta: meta("solo", "web-2222", "1", "uid-web-2222", controller("apps/v1", "Deployment", "web", "uid-web"))})
		r := run(t, workload.NewResolver(workload.WithGetter(api), workload.WithSlice()))
		rec := &recorder{}
		rec.record(t, r)

		r.Observe(slicePod("solo", "web-a", "pod-web-a", nil, controller("apps/v1", "ReplicaSet", "web-1111", "uid-web-1111")))
		synctest.Wait()
		rec.expect(t, "the pod lands", "ADDED Namespace solo (rv 1)", "ADDED ReplicaSet solo/web-1111 (rv 1)", "ADDED Deployment solo/web (rv 1)")
		gets := api.count()
		r.Observe(slicePod("solo", "web-a", "pod-web-a", nil, controller("apps/v1", "ReplicaSet", "web-2222", "uid-web-2222")))
		synctest.Wait()
		rec.expect(t, "the pod moves", "DELETED ReplicaSet solo/web-1111 (rv 1)", "ADDED ReplicaSet solo/web-2222 (rv 1)")
		if got := api.count() - gets; got != 1 {
			t.Errorf("%d gets for the pod's move, want 1: the new ReplicaSet's", got)
		}
	})
}
