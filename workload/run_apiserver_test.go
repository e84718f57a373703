package workload_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/test/kubetest"
	"github.com/podsapi/podsapi/workload"
)

// runResolver returns a Resolver of opts that asks cp as resolverUser, its
// Run loop running on the real clock until the test ends.
func runResolver(t *testing.T, cp *kubetest.ControlPlane, opts ...workload.Option) *workload.Resolver {
	t.Helper()
	g, err := workload.NewGetter(cp.Config(resolverUser, cp.Host()))
	if err != nil {
		t.Fatal(err)
	}
	return run(t, workload.NewResolver(append([]workload.Option{workload.WithGetter(g)}, opts...)...))
}

// run runs r's loop until the test ends (in a synctest bubble, on its
// clock), and returns r.
func run(t *testing.T, r *workload.Resolver) *workload.Resolver {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// deploymentPod starts a real kube-apiserver that lets resolverUser get the
// objects of the node's slice, and creates there the Deployment web, its
// ReplicaSet web-11111111 and the pod web-11111111-aaaaa, which it returns.
func deploymentPod(t *testing.T) (*kubetest.ControlPlane, world, *corev1.Pod) {
	t.Helper()
	cp := kubetest.Start(t, resolverUser)
	grantGets(t, cp.Admin)
	waitGrant(t, cp)
	w := newWorld(t, cp, "shop")
	dep := w.deployment("web")
	rs := w.replicaSet("web-11111111", "11111111", controller("apps/v1", "Deployment", dep.Name, dep.UID))
	return cp, w, w.pod("web-11111111-aaaaa", map[string]string{"pod-template-hash": "11111111"}, nil, controller("apps/v1", "ReplicaSet", rs.Name, rs.UID))
}

// awaitWorkload waits until r answers want for the pod uid, and fails the
// test when it does not within 60 s on the real clock.
func awaitWorkload(t *testing.T, r *workload.Resolver, uid types.UID, want workload.Workload) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, _ := r.Workload(uid)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("workload %+v, want %+v within 60 s", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRunRealClockAPIServer runs the Resolver's own loop on the real clock,
// its intervals short, against a real kube-apiserver: it resolves a pod's
// Deployment, keeps the answer while the API server is stopped, marks it
// Unresolved after the stale-after bound, and Resolved again once the API
// server is back. The bounds are generous: the waits end on the answers,
// never on time.
func TestRunRealClockAPIServer(t *testing.T) {
	cp, _, pod := deploymentPod(t)
	r := runResolver(t, cp, workload.WithRefreshInterval(100*time.Millisecond),
		workload.WithRetryInterval(20*time.Millisecond), workload.WithStaleAfter(300*time.Millisecond), workload.WithGetTimeout(time.Second))
	r.Observe(pod)

	await := func(want workload.Workload) { t.Helper(); awaitWorkload(t, r, pod.UID, want) }
	deployment := workload.Workload{Kind: workload.KindDeployment, Name: "web", Resolution: workload.Resolved}
	await(deployment)
	cp.StopAPIServer(t)
	stale := deployment
	stale.Resolution = workload.Unresolved
	await(stale)
	cp.StartAPIServer(t)
	await(deployment)
}

// TestRunOwnersFreedAPIServer runs the Resolver's own loop on the real
// clock against a real kube-apiserver, with room for one owner: the pod of a
// second ReplicaSet, first seen while the first took the room, is derived,
// and resolved once the first ReplicaSet's pod leaves the node. Before, it
// stayed derived for good.
func TestRunOwnersFreedAPIServer(t *testing.T) {
	cp, w, webPod := deploymentPod(t)
	api := w.deployment("api")
	apiRS := w.replicaSet("api-22222222", "22222222", controller("apps/v1", "Deployment", api.Name, api.UID))
	apiPod := w.pod("api-22222222-bbbbb", map[string]string{"pod-template-hash": "22222222"}, nil, controller("apps/v1", "ReplicaSet", apiRS.Name, apiRS.UID))

	r := runResolver(t, cp, workload.WithMaxOwners(1), workload.WithGetTimeout(5*time.Second))
	r.Observe(webPod)
	r.Observe(apiPod)
	awaitWorkload(t, r, webPod.UID, workload.Workload{Kind: workload.KindDeployment, Name: "web", Resolution: workload.Resolved})
	awaitWorkload(t, r, apiPod.UID, workload.Workload{Kind: workload.KindDeployment, Name: "api", Resolution: workload.Derived})
	r.Forget(webPod.UID)
	awaitWorkload(t, r, apiPod.UID, workload.Workload{Kind: workload.KindDeployment, Name: "api", Resolution: workload.Resolved})
}
