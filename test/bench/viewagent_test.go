package bench

import (
	"context"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// The agents of the node's-view measurement: unchanged client-go
// informers, pointed at the API server, at the door's full view or at its
// node view by their rest.Config alone.

// ownConnection returns a copy of cfg whose client has a connection of its
// own (an uncached transport: a dialer of its own), as a separate agent
// process has.
func ownConnection(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Dial = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	return cfg
}

// viewAgent is one k8sattributes-like agent of a node: the informers that
// OpenTelemetry's k8sattributes processor runs with pod, namespace, node
// and deployment attributes (pods of its node by spec.nodeName, every
// namespace, every ReplicaSet, its node by metadata.name), on one client
// with the client's defaults (JSON, as k8sattributes' client), over one
// connection of its own. Its ReplicaSets are transformed to the metadata
// k8sattributes keeps of them (name, namespace, UID, owners).
type viewAgent struct {
	informers []cache.SharedIndexInformer
	// rsEvents counts the ReplicaSet updates received.
	rsEvents atomic.Int64
}

// startViewAgent starts an agent of node on the server cfg reaches; it
// runs until ctx ends, wg waiting for it.
func startViewAgent(t *testing.T, ctx context.Context, wg *sync.WaitGroup, cfg *rest.Config, node string) *viewAgent {
	t.Helper()
	client, err := kubernetes.NewForConfig(ownConnection(cfg))
	if err != nil {
		t.Fatal(err)
	}
	onNode := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
	}
	theNode := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", node).String()
	}
	rs := appsinformers.NewReplicaSetInformer(client, "", 0, cache.Indexers{})
	if err := rs.SetTransform(func(obj any) (any, error) {
		r, ok := obj.(*appsv1.ReplicaSet)
		if !ok {
			return obj, nil // A tombstone.
		}
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: r.Namespace, UID: r.UID, OwnerReferences: r.OwnerReferences}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	a := &viewAgent{informers: []cache.SharedIndexInformer{
		coreinformers.NewFilteredPodInformer(client, "", 0, cache.Indexers{}, onNode),
		coreinformers.NewNamespaceInformer(client, 0, cache.Indexers{}),
		rs,
		coreinformers.NewFilteredNodeInformer(client, 0, cache.Indexers{}, theNode),
	}}
	// The churn changes ReplicaSets; nothing else updates one, and an
	// informer without a resync period notifies no update of its own.
	if _, err := rs.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, _ any) { a.rsEvents.Add(1) }}); err != nil {
		t.Fatal(err)
	}
	for _, inf := range a.informers {
		wg.Go(func() { inf.RunWithContext(ctx) })
	}
	return a
}

// synced reports whether every informer of a has synced.
func (a *viewAgent) synced() bool {
	for _, inf := range a.informers {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

// metadataInformerHeap runs an unchanged metadata-only informer of every
// ReplicaSet (client-go's metadatainformer, as controller-runtime's
// metadata caches and many agents run it: PartialObjectMetadata, protobuf)
// on the server cfg reaches, until it has synced, and returns the objects
// it holds, how long it took to sync and the Go heap it holds: the live
// heap after a collection with it synced, less that once it has stopped,
// its connection closed and nothing refers to it. Measured at one moment
// each, a few milliseconds apart, the two take nothing else of the
// process's work in between.
func metadataInformerHeap(t *testing.T, cfg *rest.Config) (objects int, synced time.Duration, heap int64) {
	t.Helper()
	cfg = ownConnection(cfg)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client, err := metadata.NewForConfigAndClient(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	inf := metadatainformer.NewFilteredMetadataInformer(client, appsv1.SchemeGroupVersion.WithResource("replicasets"), "", 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil).Informer()
	ctx, cancel := context.WithTimeout(t.Context(), loadTimeout)
	var wg sync.WaitGroup
	stop := func() {
		cancel()
		wg.Wait()
		hc.CloseIdleConnections()
	}
	start := time.Now()
	wg.Go(func() { inf.RunWithContext(ctx) })
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		stop()
		t.Fatalf("the metadata informer of ReplicaSets did not sync within %v", loadTimeout)
	}
	synced = time.Since(start)
	objects = len(inf.GetStore().ListKeys())
	with := liveHeap()
	stop()
	return objects, synced, with - liveHeap()
}

// liveHeap returns the bytes of the Go heap in use after a collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC() // The first may leave the finalizers' objects.
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
