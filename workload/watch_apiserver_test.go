package workload_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/kubetest"
	"github.com/podsapi/podsapi/test/podstest"
	"github.com/podsapi/podsapi/workload"
)

// TestWatchWorkloadChangesAPIServer serves, over the server's socket to
// connect-go and grpc-go, the workload changes that a real kube-apiserver's
// answers make while the pod itself does not change: a ReplicaSet that its
// Deployment releases turns the pod's workload into that ReplicaSet
// (MODIFIED to a watch that includes workloads, DELETED to one that selects
// the Deployment), and adopted again turns it back (MODIFIED, ADDED).
// ListPods answers the workload of the moment. The Resolver runs on the real
// clock, its refresh short; the waits end on the events, never on time.
func TestWatchWorkloadChangesAPIServer(t *testing.T) {
	cp := kubetest.Start(t, resolverUser)
	grantGets(t, cp.Admin)
	waitGrant(t, cp)
	w := newWorld(t, cp, "shop")
	dep := w.deployment("web")
	rs := w.replicaSet("web-11111111", "11111111", controller("apps/v1", "Deployment", dep.Name, dep.UID))
	pod := w.pod("web-11111111-aaaaa", map[string]string{"pod-template-hash": "11111111"}, nil, controller("apps/v1", "ReplicaSet", rs.Name, rs.UID))

	r := runResolver(t, cp, workload.WithRefreshInterval(100*time.Millisecond),
		workload.WithRetryInterval(20*time.Millisecond), workload.WithGetTimeout(5*time.Second))
	st := store.New()
	sink := r.Sink(st)
	sink.Upsert(pod)
	sink.MarkSynced()
	// The watches start from the API server's answer, not the derivation.
	deployment := workload.Workload{Kind: workload.KindDeployment, Name: "web", Resolution: workload.Resolved}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if got, _ := r.Workload(pod.UID); got == deployment {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("workload %+v, want %+v within 60 s", got, deployment)
		}
	}
	fx := podstest.Serve(t, st, server.Config{Workloads: r, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})

	const (
		added    = podsv1alpha1.EventType_EVENT_TYPE_ADDED
		modified = podsv1alpha1.EventType_EVENT_TYPE_MODIFIED
		deleted  = podsv1alpha1.EventType_EVENT_TYPE_DELETED
		synced   = podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE
	)
	ofDeployment := &podsv1alpha1.PodWorkload{Kind: "Deployment", Name: "web", Resolution: podsv1alpha1.WorkloadResolution_WORKLOAD_RESOLUTION_RESOLVED}
	ofReplicaSet := &podsv1alpha1.PodWorkload{Kind: "ReplicaSet", Name: rs.Name, Resolution: podsv1alpha1.WorkloadResolution_WORKLOAD_RESOLUTION_RESOLVED}
	setOwners := func(owners []metav1.OwnerReference) {
		t.Helper()
		cur, err := cp.Admin.AppsV1().ReplicaSets(w.ns).Get(t.Context(), rs.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.OwnerReferences = owners
		if _, err := cp.Admin.AppsV1().ReplicaSets(w.ns).Update(t.Context(), cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(s podstest.WatchStream, typ podsv1alpha1.EventType, want *podsv1alpha1.PodWorkload) {
		t.Helper()
		ev := podstest.Recv(t, s)
		name := ""
		if typ != synced {
			name = pod.Name
		}
		if ev.Type != typ || ev.Pod.GetMetadata().GetName() != name || !proto.Equal(ev.Workload, want) {
			t.Fatalf("event %v %s with workload %v, want %v %s with %v", ev.Type, ev.Pod.GetMetadata().GetName(), ev.Workload, typ, name, want)
		}
	}
	list := func(c podstest.APIClient, want *podsv1alpha1.PodWorkload) {
		t.Helper()
		resp, err := c.ListReq(t.Context(), &podsv1alpha1.PodListRequest{IncludeWorkloads: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Workloads[string(pod.UID)]; !proto.Equal(got, want) {
			t.Errorf("ListPods: workload %v, want %v", got, want)
		}
	}

	for _, kind := range podstest.ClientKinds {
		t.Run(kind.Name, func(t *testing.T) {
			c := kind.Dial(t, fx.Socket)
			wctx, stop := context.WithTimeout(t.Context(), 2*time.Minute)
			defer stop()
			included, err := c.WatchReq(wctx, &podsv1alpha1.PodWatchRequest{IncludeWorkloads: true}, podstest.MaskHeader("metadata.name"))
			if err != nil {
				t.Fatal(err)
			}
			selected, err := c.WatchReq(wctx, &podsv1alpha1.PodWatchRequest{
				IncludeWorkloads: true, WorkloadSelector: &podsv1alpha1.WorkloadSelector{Kind: "Deployment", Name: "web"},
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []podstest.WatchStream{included, selected} {
				expect(s, added, ofDeployment)
				expect(s, synced, nil)
			}
			list(c, ofDeployment)

			setOwners(nil) // the Deployment releases its ReplicaSet
			expect(included, modified, ofReplicaSet)
			expect(selected, deleted, ofReplicaSet)
			list(c, ofReplicaSet)

			setOwners(controller("apps/v1", "Deployment", dep.Name, dep.UID)) // and adopts it again
			expect(included, modified, ofDeployment)
			expect(selected, added, ofDeployment)
			list(c, ofDeployment)
		})
	}
}

// TestWatchWorkloadTurnsStaleAPIServer serves, over the server's socket to
// connect-go and grpc-go, the workload that turns Unresolved when a real
// kube-apiserver, stopped, has not confirmed it for the stale-after bound:
// MODIFIED with UNRESOLVED to the watches that include workloads, as
// ListPods answers it, and MODIFIED with RESOLVED once the API server is
// back. Before, the watches kept RESOLVED: the Resolver told them only of
// the changes an answer made. The Resolver runs on the real clock, its
// intervals short; the waits end on the events, never on time.
func TestWatchWorkloadTurnsStaleAPIServer(t *testing.T) {
	cp, _, pod := deploymentPod(t)
	r := runResolver(t, cp, workload.WithRefreshInterval(100*time.Millisecond), workload.WithRetryInterval(20*time.Millisecond),
		workload.WithStaleAfter(3*time.Second), workload.WithGetTimeout(time.Second))
	st := store.New()
	sink := r.Sink(st)
	sink.Upsert(pod)
	sink.MarkSynced()
	deployment := workload.Workload{Kind: workload.KindDeployment, Name: "web", Resolution: workload.Resolved}
	awaitWorkload(t, r, pod.UID, deployment)
	fx := podstest.Serve(t, st, server.Config{Workloads: r, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})

	const (
		added    = podsv1alpha1.EventType_EVENT_TYPE_ADDED
		modified = podsv1alpha1.EventType_EVENT_TYPE_MODIFIED
		synced   = podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE
	)
	resolved := &podsv1alpha1.PodWorkload{Kind: "Deployment", Name: "web", Resolution: podsv1alpha1.WorkloadResolution_WORKLOAD_RESOLUTION_RESOLVED}
	unresolved := &podsv1alpha1.PodWorkload{Kind: "Deployment", Name: "web", Resolution: podsv1alpha1.WorkloadResolution_WORKLOAD_RESOLUTION_UNRESOLVED}
	type watcher struct {
		name   string
		c      podstest.APIClient
		stream podstest.WatchStream
	}
	wctx, stop := context.WithTimeout(t.Context(), 2*time.Minute)
	defer stop()
	var watchers []watcher
	for _, kind := range podstest.ClientKinds {
		c := kind.Dial(t, fx.Socket)
		s, err := c.WatchReq(wctx, &podsv1alpha1.PodWatchRequest{IncludeWorkloads: true}, podstest.MaskHeader("metadata.name"))
		if err != nil {
			t.Fatal(err)
		}
		watchers = append(watchers, watcher{name: kind.Name, c: c, stream: s})
	}
	expect := func(wt watcher, typ podsv1alpha1.EventType, want *podsv1alpha1.PodWorkload) {
		t.Helper()
		ev := podstest.Recv(t, wt.stream)
		name := ""
		if typ != synced {
			name = pod.Name
		}
		if ev.Type != typ || ev.Pod.GetMetadata().GetName() != name || !proto.Equal(ev.Workload, want) {
			t.Fatalf("%s: event %v %s with workload %v, want %v %s with %v", wt.name, ev.Type, ev.Pod.GetMetadata().GetName(), ev.Workload, typ, name, want)
		}
	}
	list := func(wt watcher, want *podsv1alpha1.PodWorkload) {
		t.Helper()
		resp, err := wt.c.ListReq(t.Context(), &podsv1alpha1.PodListRequest{IncludeWorkloads: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Workloads[string(pod.UID)]; !proto.Equal(got, want) {
			t.Errorf("%s: ListPods: workload %v, want %v", wt.name, got, want)
		}
	}
	for _, wt := range watchers {
		expect(wt, added, resolved)
		expect(wt, synced, nil)
	}

	cp.StopAPIServer(t)
	for _, wt := range watchers {
		expect(wt, modified, unresolved)
		list(wt, unresolved)
	}
	cp.StartAPIServer(t)
	for _, wt := range watchers {
		expect(wt, modified, resolved)
		list(wt, resolved)
	}
}
