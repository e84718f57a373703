package workload_test

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/test/kubetest"
	"github.com/podsapi/podsapi/workload"
)

// TestSliceAPIServer keeps the node's slice against a real kube-apiserver,
// on the real clock, its refresh short, with whole objects got as the
// resolver's identity (RBAC: get of the slice's kinds only): a
// Deployment's pods through their ReplicaSet, a StatefulSet's, a
// DaemonSet's, a CronJob's through its Job, and a bare pod. Every owner up
// the chain and every namespace is ADDED once the pods land, whole (its
// spec, as a typed client reads it); a change arrives as MODIFIED within
// the refresh; an owner leaves with its last pod; the API server stopped
// keeps what is held (no event, Age growing) and back, changes arrive
// again. The API server serves no list and no watch of any of these kinds.
// The waits end on the events, never on time.
func TestSliceAPIServer(t *testing.T) {
	cp := kubetest.Start(t, resolverUser)
	grantGets(t, cp.Admin)
	waitGrant(t, cp)
	shop := newWorld(t, cp, "shop")
	ops := newWorld(t, cp, "ops")
	hash := map[string]string{"pod-template-hash": "11111111"}

	dep := shop.deployment("web")
	rs := shop.replicaSet("web-11111111", "11111111", controller("apps/v1", "Deployment", dep.Name, dep.UID))
	webA := shop.pod("web-11111111-aaaaa", hash, nil, controller("apps/v1", "ReplicaSet", rs.Name, rs.UID))
	webB := shop.pod("web-11111111-bbbbb", hash, nil, controller("apps/v1", "ReplicaSet", rs.Name, rs.UID))
	sts := shop.statefulSet("cache")
	cache0 := shop.pod("cache-0", nil, nil, controller("apps/v1", "StatefulSet", sts.Name, sts.UID))
	ds := ops.daemonSet("agent")
	agent := ops.pod("agent-h7c2d", nil, nil, controller("apps/v1", "DaemonSet", ds.Name, ds.UID))
	cron := ops.cronJob("backup")
	job := ops.job("backup-29412345", controller("batch/v1", "CronJob", cron.Name, cron.UID))
	backup := ops.pod("backup-29412345-kq2lm", nil, nil, controller("batch/v1", "Job", job.Name, job.UID))
	debug := shop.pod("debug", nil, nil, nil)
	before := apiserverMetrics(t, cp.Admin)

	g, err := workload.NewObjectGetter(cp.Config(resolverUser, cp.Host()))
	if err != nil {
		t.Fatal(err)
	}
	const refresh = 200 * time.Millisecond
	r := workload.NewResolver(workload.WithGetter(g), workload.WithSlice(), workload.WithRefreshInterval(refresh),
		workload.WithRetryInterval(50*time.Millisecond), workload.WithGetTimeout(5*time.Second))
	rec := &recorder{}
	rec.record(t, r)
	run(t, r)

	sink := r.Sink(discard{})
	for _, p := range []*corev1.Pod{webA, webB, cache0, agent, backup, debug} {
		sink.Upsert(p)
	}
	sink.MarkSynced()
	rec.await(t, "the pods land",
		"ADDED Namespace shop", "ADDED Namespace ops",
		"ADDED ReplicaSet shop/web-11111111", "ADDED Deployment shop/web",
		"ADDED StatefulSet shop/cache", "ADDED DaemonSet ops/agent",
		"ADDED Job ops/backup-29412345", "ADDED CronJob ops/backup")
	if !r.HasSynced() {
		t.Error("not HasSynced once every object was told")
	}
	// Whole objects, as a typed client reads them.
	if d, ok := rec.object("Deployment shop/web").(*appsv1.Deployment); !ok || d.UID != dep.UID || len(d.Spec.Template.Spec.Containers) != 1 {
		t.Errorf("the Deployment told is %T %+v, want the whole Deployment web", rec.object("Deployment shop/web"), rec.object("Deployment shop/web"))
	}
	if ns, ok := rec.object("Namespace ops").(*corev1.Namespace); !ok || ns.Status.Phase != corev1.NamespaceActive {
		t.Errorf("the namespace told is %+v, want ops, active", rec.object("Namespace ops"))
	}

	t.Run("a change within the refresh", func(t *testing.T) {
		cur, err := cp.Admin.AppsV1().Deployments(shop.ns).Get(t.Context(), dep.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Labels = map[string]string{"tier": "front"}
		if _, err := cp.Admin.AppsV1().Deployments(shop.ns).Update(t.Context(), cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		rec.await(t, "the Deployment changed", "MODIFIED Deployment shop/web")
		if d := rec.object("Deployment shop/web"); d.GetLabels()["tier"] != "front" {
			t.Errorf("labels %v after the change, want tier=front", d.GetLabels())
		}
	})

	t.Run("an owner leaves with its last pod", func(t *testing.T) {
		sink.Delete(webA.UID)
		sink.Delete(webB.UID)
		rec.await(t, "the Deployment's pods left", "DELETED ReplicaSet shop/web-11111111", "DELETED Deployment shop/web")
	})

	// Before the API server restarts, which resets its metrics.
	t.Run("no list, no watch", func(t *testing.T) {
		after := apiserverMetrics(t, cp.Admin)
		for _, res := range workload.SliceResources() {
			for _, verb := range []string{"LIST", "WATCH"} {
				key := "apiserver_request_total " + verb + " " + res.Resource
				if n := after[key] - before[key]; n != 0 {
					t.Errorf("%s: %v, want none", key, n)
				}
			}
		}
	})

	t.Run("the API server stopped and back", func(t *testing.T) {
		cp.StopAPIServer(t)
		for deadline := time.Now().Add(60 * time.Second); r.Age() < 5*refresh; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("Age %v with the API server stopped, want it to grow past %v", r.Age(), 5*refresh)
			}
		}
		rec.await(t, "the API server stopped") // nothing: what is held is kept
		if rec.object("StatefulSet shop/cache") == nil {
			t.Fatal("the StatefulSet is no longer held")
		}
		cp.StartAPIServer(t)
		cur, err := cp.Admin.AppsV1().StatefulSets(shop.ns).Get(t.Context(), sts.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Annotations = map[string]string{"changed": "after the outage"}
		if _, err := cp.Admin.AppsV1().StatefulSets(shop.ns).Update(t.Context(), cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		rec.await(t, "the API server back", "MODIFIED StatefulSet shop/cache")
	})

	sink.Delete(cache0.UID)
	sink.Delete(agent.UID)
	sink.Delete(backup.UID)
	sink.Delete(debug.UID)
	rec.await(t, "every pod gone",
		"DELETED StatefulSet shop/cache", "DELETED DaemonSet ops/agent", "DELETED Job ops/backup-29412345", "DELETED CronJob ops/backup",
		"DELETED Namespace shop", "DELETED Namespace ops")
}
