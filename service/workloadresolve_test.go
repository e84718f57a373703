package service_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/service"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
	"github.com/podsapi/podsapi/workload"
)

// ownerAnswers is a workload.Getter for the tests that run on synctest's
// clock, where no API server can run (a connection to one is never durably
// blocked, so the bubble's clock would never advance): it answers the
// owners it holds, by name, as the API server's metadata get does, and
// fails every get while down, as an API server stopped does. The same
// behaviour against a real kube-apiserver is tested on the real clock
// (workload's TestWatchWorkloadTurnsStaleAPIServer).
type ownerAnswers struct {
	mu     sync.Mutex
	owners map[string]*metav1.PartialObjectMetadata
	down   bool
}

func (o *ownerAnswers) Get(_ context.Context, _ schema.GroupVersionResource, namespace, name string) (workload.Object, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.down {
		return nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
	}
	obj, ok := o.owners[namespace+"/"+name]
	if !ok {
		return nil, errors.New("not found")
	}
	return obj.DeepCopy(), nil
}

func (o *ownerAnswers) setDown(down bool) {
	o.mu.Lock()
	o.down = down
	o.mu.Unlock()
}

// controllerOf returns the owner references of an object controlled by the
// apps/v1 kind name.
func controllerOf(kind, name string) []metav1.OwnerReference {
	yes := true
	return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: &yes}}
}

// replicaSetOf returns the metadata of the ReplicaSet name (its UID as
// ownedBy writes it) controlled by the Deployment deployment.
func replicaSetOf(name, deployment string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Namespace: "shop", Name: name, UID: types.UID("uid-" + name), OwnerReferences: controllerOf("Deployment", deployment),
	}}
}

// runResolver returns a Resolver asking api with opts, whose Run loop runs
// in the test's bubble until the test ends, and a synced store fed through
// it with pods, in order.
func runResolver(t *testing.T, api *ownerAnswers, opts []workload.Option, pods ...*corev1.Pod) (*store.Store, *workload.Resolver, workload.Sink) {
	t.Helper()
	opts = append([]workload.Option{workload.WithGetter(api), workload.WithLogger(slog.New(slog.NewTextHandler(t.Output(), nil)))}, opts...)
	r := workload.NewResolver(opts...)
	st := store.New()
	sink := r.Sink(st)
	for _, p := range pods {
		sink.Upsert(p)
	}
	sink.MarkSynced()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return st, r, sink
}

// watchWorkloads serves st with the workloads of r, and opens a watch that
// includes workloads, which ends, and fails the test, when no event comes
// within an hour of the bubble's clock.
func watchWorkloads(t *testing.T, st *store.Store, r *workload.Resolver) (podsv1alpha1connect.PodsClient, *connect.ServerStreamForClient[podsv1alpha1.PodWatchResponse]) {
	t.Helper()
	h := newHarness(t, st, false, service.WithWorkloads(r))
	c := podsv1alpha1connect.NewPodsClient(h.http, baseURL, connect.WithGRPC())
	req := connect.NewRequest(&podsv1alpha1.PodWatchRequest{IncludeWorkloads: true})
	req.Header().Set("x-kubernetes-fieldmask", "metadata.name")
	ctx, stop := context.WithTimeout(t.Context(), time.Hour)
	t.Cleanup(stop)
	s, err := c.WatchPods(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return c, s
}

// listWorkload checks the workload ListPods answers for pod uid.
func listWorkload(t *testing.T, c podsv1alpha1connect.PodsClient, uid types.UID, want *podsv1alpha1.PodWorkload) {
	t.Helper()
	resp, err := c.ListPods(t.Context(), connect.NewRequest(&podsv1alpha1.PodListRequest{IncludeWorkloads: true}))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Msg.Workloads[string(uid)]; !proto.Equal(got, want) {
		t.Fatalf("ListPods: workload %v, want %v", got, want)
	}
}

// TestWatchPodsWorkloadTurnsStale checks, on synctest's clock, that a watch
// that includes workloads is sent the workload that turns Unresolved when
// the API server's last answer grows older than the stale-after bound, at
// that instant, as ListPods answers it then, and Resolved again once the API
// server answers. Before, the Resolver told watches only of the changes an
// answer made, and an answer that grows stale changes none: the watch kept
// RESOLVED while ListPods said UNRESOLVED.
func TestWatchPodsWorkloadTurnsStale(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			refresh    = 10 * time.Minute
			retry      = time.Minute
			staleAfter = 25 * time.Minute
			modified   = podsv1alpha1.EventType_EVENT_TYPE_MODIFIED
		)
		web := ofDeployment(podstest.Pod("shop", "web-5d9f8b6c5d-aaaaa", 1), "web", "5d9f8b6c5d")
		api := &ownerAnswers{owners: map[string]*metav1.PartialObjectMetadata{"shop/web-5d9f8b6c5d": replicaSetOf("web-5d9f8b6c5d", "web")}}
		st, r, _ := runResolver(t, api, []workload.Option{workload.WithRefreshInterval(refresh),
			workload.WithRetryInterval(retry), workload.WithStaleAfter(staleAfter)}, web)
		synctest.Wait()
		confirmed := time.Now() // the API server's first answer

		resolved := &podsv1alpha1.PodWorkload{Kind: "Deployment", Name: "web", Resolution: podsv1alpha1.WorkloadResolution_WORKLOAD_RESOLUTION_RESOLVED}
		unresolved := &podsv1alpha1.PodWorkload{Kind: "Deployment", Name: "web", Resolution: podsv1alpha1.WorkloadResolution_WORKLOAD_RESOLUTION_UNRESOLVED}
		c, s := watchWorkloads(t, st, r)
		expectEvents(t, s, watchEvent{podsv1alpha1.EventType_EVENT_TYPE_ADDED, web.Name, resolved},
			watchEvent{podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE, "", nil})
		listWorkload(t, c, web.UID, resolved)

		api.setDown(true)
		expectEvents(t, s, watchEvent{modified, web.Name, unresolved})
		if d := time.Since(confirmed); d != staleAfter {
			t.Errorf("UNRESOLVED sent %v after the last answer, want at the stale-after bound, %v", d, staleAfter)
		}
		listWorkload(t, c, web.UID, unresolved)

		api.setDown(false)
		expectEvents(t, s, watchEvent{modified, web.Name, resolved})
		listWorkload(t, c, web.UID, resolved)
	})
}

// TestWatchPodsWorkloadOwnersFreed checks, on synctest's clock, that a pod
// first seen while the Resolver kept as many owners as it may (WithMaxOwners)
// is resolved once another owner leaves, and a watch that includes
// workloads is sent it. Before, such a pod stayed derived for good.
func TestWatchPodsWorkloadOwnersFreed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		web := ofDeployment(podstest.Pod("shop", "web-5d9f8b6c5d-aaaaa", 1), "web", "5d9f8b6c5d")
		shop := ofDeployment(podstest.Pod("shop", "shop-7c6b5a4d3e-bbbbb", 2), "shop", "7c6b5a4d3e")
		api := &ownerAnswers{owners: map[string]*metav1.PartialObjectMetadata{
			"shop/web-5d9f8b6c5d":  replicaSetOf("web-5d9f8b6c5d", "web"),
			"shop/shop-7c6b5a4d3e": replicaSetOf("shop-7c6b5a4d3e", "shop"),
		}}
		// web's ReplicaSet takes the one place; shop's waits.
		st, r, sink := runResolver(t, api, []workload.Option{workload.WithMaxOwners(1)}, web, shop)
		synctest.Wait()

		webResolved := &podsv1alpha1.PodWorkload{Kind: "Deployment", Name: "web", Resolution: podsv1alpha1.WorkloadResolution_WORKLOAD_RESOLUTION_RESOLVED}
		shopResolved := &podsv1alpha1.PodWorkload{Kind: "Deployment", Name: "shop", Resolution: podsv1alpha1.WorkloadResolution_WORKLOAD_RESOLUTION_RESOLVED}
		c, s := watchWorkloads(t, st, r)
		expectEvents(t, s, watchEvent{podsv1alpha1.EventType_EVENT_TYPE_ADDED, shop.Name, shopWorkload},
			watchEvent{podsv1alpha1.EventType_EVENT_TYPE_ADDED, web.Name, webResolved},
			watchEvent{podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE, "", nil})
		listWorkload(t, c, shop.UID, shopWorkload)

		sink.Delete(web.UID) // its ReplicaSet leaves: room for shop's
		expectEvents(t, s, watchEvent{podsv1alpha1.EventType_EVENT_TYPE_DELETED, web.Name, webResolved},
			watchEvent{podsv1alpha1.EventType_EVENT_TYPE_MODIFIED, shop.Name, shopResolved})
		listWorkload(t, c, shop.UID, shopResolved)
	})
}
