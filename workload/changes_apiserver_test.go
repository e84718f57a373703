package workload_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/test/kubetest"
	"github.com/podsapi/podsapi/test/podstest"
	"github.com/podsapi/podsapi/workload"
)

// TestResolverOwnersChangeAPIServer follows owners that change under the
// node's pods, against a real kube-apiserver: a ReplicaSet orphaned by its
// Deployment's deletion, a pod moved to another ReplicaSet (a rollout), a
// Job deleted and created again under its name, and the API server
// unreachable: the last known answer is kept until the stale-after bound,
// then marked Unresolved, and Resolved again once the API server answers.
func TestResolverOwnersChangeAPIServer(t *testing.T) {
	cp := kubetest.Start(t, resolverUser)
	grantGets(t, cp.Admin)
	waitGrant(t, cp)
	w := newWorld(t, cp, "shop")
	ctx := t.Context()
	const (
		refresh = 30 * time.Minute
		retry   = 10 * time.Second
		stale   = time.Hour
	)
	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	reg := prometheus.NewRegistry()
	r := newResolver(t, cp, clk, workload.WithRefreshInterval(refresh), workload.WithRetryInterval(retry), workload.WithStaleAfter(stale), workload.WithRegisterer(reg))

	dep := w.deployment("web")
	rs1 := w.replicaSet("web-11111111", "11111111", controller("apps/v1", "Deployment", dep.Name, dep.UID))
	pod := w.pod("web-11111111-aaaaa", map[string]string{"pod-template-hash": "11111111"}, nil, controller("apps/v1", "ReplicaSet", rs1.Name, rs1.UID))
	job := w.job("report", nil)
	jobPod := w.pod("report-bbbbb", nil, nil, controller("batch/v1", "Job", job.Name, job.UID))
	r.Observe(pod)
	r.Observe(jobPod)
	r.Sync(ctx)
	deployment := workload.Workload{Kind: workload.KindDeployment, Name: "web", Resolution: workload.Resolved}
	want(t, r, pod, deployment)

	t.Run("pod moved to another ReplicaSet", func(t *testing.T) {
		rs2 := w.replicaSet("web-22222222", "22222222", controller("apps/v1", "Deployment", dep.Name, dep.UID))
		moved := pod.DeepCopy()
		moved.OwnerReferences = controller("apps/v1", "ReplicaSet", rs2.Name, rs2.UID)
		moved.Labels["pod-template-hash"] = "22222222"
		moved, err := cp.Admin.CoreV1().Pods(w.ns).Update(ctx, moved, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		before := r.Gets()[workload.KindReplicaSet]
		r.Observe(moved)
		r.Sync(ctx)
		want(t, r, moved, deployment)
		if got := r.Gets()[workload.KindReplicaSet]; got != before+1 {
			t.Errorf("ReplicaSet gets %d, want %d: one for the new owner", got, before+1)
		}
		pod = moved
	})

	t.Run("deployment deleted, its ReplicaSet orphaned", func(t *testing.T) {
		rs, err := cp.Admin.AppsV1().ReplicaSets(w.ns).Get(ctx, "web-22222222", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// What the garbage collector does when the Deployment is deleted
		// with propagationPolicy=Orphan.
		if err := cp.Admin.AppsV1().Deployments(w.ns).Delete(ctx, dep.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		rs.OwnerReferences = nil
		if _, err := cp.Admin.AppsV1().ReplicaSets(w.ns).Update(ctx, rs, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		r.Sync(ctx)
		want(t, r, pod, deployment) // not asked again before the refresh interval
		clk.Advance(refresh)
		r.Sync(ctx)
		want(t, r, pod, workload.Workload{Kind: workload.KindReplicaSet, Name: "web-22222222", Resolution: workload.Resolved})
	})

	t.Run("job deleted and created again under its name", func(t *testing.T) {
		background := metav1.DeletePropagationBackground
		if err := cp.Admin.BatchV1().Jobs(w.ns).Delete(ctx, job.Name, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
			t.Fatal(err)
		}
		w.job("report", nil)
		clk.Advance(refresh)
		r.Sync(ctx)
		want(t, r, jobPod, workload.Workload{Kind: workload.KindJob, Name: "report", Resolution: workload.Unresolved})
	})

	t.Run("API server unreachable", func(t *testing.T) {
		cp.StopAPIServer(t)
		orphaned := workload.Workload{Kind: workload.KindReplicaSet, Name: "web-22222222"}
		clk.Advance(refresh)
		r.Sync(ctx) // fails: the last known answer is kept
		orphaned.Resolution = workload.Resolved
		want(t, r, pod, orphaned)
		clk.Advance(stale - refresh + time.Second)
		r.Sync(ctx)
		orphaned.Resolution = workload.Unresolved
		want(t, r, pod, orphaned)
		// A pod of an owner never asked about is derived meanwhile.
		newPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "api-33333333-ccccc", Namespace: w.ns, UID: "00000000-0000-4000-8000-0000000a3333",
			Labels: map[string]string{"pod-template-hash": "33333333"}, OwnerReferences: controller("apps/v1", "ReplicaSet", "api-33333333", "00000000-0000-4000-8000-0000000b3333")}}
		r.Observe(newPod)
		r.Sync(ctx)
		want(t, r, newPod, workload.Workload{Kind: workload.KindDeployment, Name: "api", Resolution: workload.Derived})

		cp.StartAPIServer(t)
		r.Sync(ctx) // not due: the retry interval doubled after two failures
		orphaned.Resolution = workload.Unresolved
		want(t, r, pod, orphaned)
		clk.Advance(2 * retry)
		r.Sync(ctx)
		orphaned.Resolution = workload.Resolved
		want(t, r, pod, orphaned)
		// That ReplicaSet does not exist: the owner is gone.
		want(t, r, newPod, workload.Workload{Kind: workload.KindReplicaSet, Name: "api-33333333", Resolution: workload.Unresolved})
	})

	t.Run("metrics", func(t *testing.T) {
		gets := r.Gets()
		var counted float64
		for _, kind := range []string{workload.KindReplicaSet, workload.KindJob} {
			for _, result := range []string{"found", "gone", "error"} {
				counted += podstest.MetricValue(t, reg, "podsapi_workload_gets_total", map[string]string{"kind": kind, "result": result})
			}
		}
		if want := float64(gets[workload.KindReplicaSet] + gets[workload.KindJob]); counted != want {
			t.Errorf("podsapi_workload_gets_total sums to %v, want the %v gets sent", counted, want)
		}
		// The two gets with the API server stopped, of the ReplicaSet.
		if got := podstest.MetricValue(t, reg, "podsapi_workload_gets_total", map[string]string{"kind": workload.KindReplicaSet, "result": "error"}); got < 2 {
			t.Errorf("gets that failed: %v, want at least 2", got)
		}
		if got := podstest.MetricValue(t, reg, "podsapi_workload_gets_total", map[string]string{"kind": workload.KindJob, "result": "gone"}); got < 1 {
			t.Errorf("gets of a Job gone: %v, want at least 1", got)
		}
		// The orphaned ReplicaSet, the Job gone, and the ReplicaSet that
		// never existed.
		if got := podstest.MetricValue(t, reg, "podsapi_workload_owners", nil); got != 3 {
			t.Errorf("podsapi_workload_owners = %v, want 3", got)
		}
	})

	t.Run("pods gone, owners forgotten", func(t *testing.T) {
		before := r.Gets()
		for _, uid := range []string{string(pod.UID), string(jobPod.UID), "00000000-0000-4000-8000-0000000a3333"} {
			r.Forget(metav1UID(uid))
		}
		clk.Advance(refresh)
		if next := r.Sync(ctx); !next.IsZero() {
			t.Errorf("Sync: next due %v, want none: no pod references an owner", next)
		}
		if got := r.Gets(); got[workload.KindReplicaSet] != before[workload.KindReplicaSet] || got[workload.KindJob] != before[workload.KindJob] {
			t.Errorf("gets %v after the pods left, want %v", got, before)
		}
		if got := podstest.MetricValue(t, reg, "podsapi_workload_owners", nil); got != 0 {
			t.Errorf("podsapi_workload_owners = %v after the pods left, want 0", got)
		}
	})
}
