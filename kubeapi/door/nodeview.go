package door

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/podsapi/podsapi/budget"
	"github.com/podsapi/podsapi/kindstore"
	"github.com/podsapi/podsapi/kubeapi"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/workload"
)

// NodeViewPath is the path, under the door's URL, of the node view: a
// kubeconfig whose server is <door>/views/node (podsctl kubeconfig --view
// node) has client-go ask <door>/views/node/api/v1/... of it.
const NodeViewPath = "/views/node"

// WithNodeView has the door serve the node view under NodeViewPath:
// a request whose path begins with it is stripped of it, then routed as
// any other, with view as its Local side (what view claims is answered by
// it, after the same authentication, authorization and watch slots;
// everything else is passed through to the API server with the caller's
// own credentials, as the full view's is). By default there is no node
// view: such a request is passed through unchanged, and the API server
// answers it 404.
func WithNodeView(view Local) Option { return func(d *Door) { d.nodeView = view } }

// viewOf returns the Local side of r and r as that side reads it: the node
// view's, with the view's path stripped, when r is under NodeViewPath and
// the door serves the node view; else the full view's, r unchanged.
func (d *Door) viewOf(r *http.Request) (Local, *http.Request) {
	if d.nodeView == nil {
		return d.local, r
	}
	rest, ok := underView(r.URL.Path)
	if !ok {
		return d.local, r
	}
	u := *r.URL
	u.Path = rest
	if u.RawPath != "" {
		// An escaped path that does not begin with the view's own path
		// (/views%2Fnode/...) is not the view's.
		if u.RawPath, ok = underView(u.RawPath); !ok {
			return d.local, r
		}
	}
	stripped := r.Clone(r.Context())
	stripped.URL = &u
	stripped.RequestURI = u.RequestURI()
	return d.nodeView, stripped
}

// underView returns path without NodeViewPath ("/" for the view's path
// itself), and whether path is under it.
func underView(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, NodeViewPath)
	switch {
	case !ok, rest != "" && rest[0] != '/':
		return "", false
	case rest == "":
		return "/", true
	}
	return rest, true
}

// Slice is the node's slice that the node view answers from: a
// workload.Resolver with workload.WithSlice.
type Slice interface {
	// AddEventHandler tells h of the objects of resource (one of
	// workload.SliceResources) in the slice, as an informer's handler is
	// told, until remove is called.
	AddEventHandler(resource schema.GroupVersionResource, h cache.ResourceEventHandler) (remove func())
	// HasSynced reports whether the slice is complete as far as the API
	// server answered.
	HasSynced() bool
}

// nodeView is the node view's Local side (handler) and the stores it
// answers from: the node's pods (the full view's store), the node (the
// full view's Kinds.Node), and, for each resource of
// workload.SliceResources, a kindstore fed by the slice.
type nodeView struct {
	handler *kubeapi.Handler
	slice   Slice
	// stores are the slice's resources' stores.
	stores map[schema.GroupVersionResource]sliceStore
}

// sliceStore is a kindstore as the slice feeds it and the handler reads
// it.
type sliceStore interface {
	kubeapi.PodReader
	cache.ResourceEventHandler
	MarkSynced()
}

// sliceStores make the store of each resource of the node's slice, by
// resource (workload.SliceResources).
var sliceStores = map[string]func(kindstore.Option) sliceStore{
	"namespaces":   func(o kindstore.Option) sliceStore { return kindstore.NewNamespaces(o) },
	"replicasets":  func(o kindstore.Option) sliceStore { return kindstore.NewReplicaSets(o) },
	"deployments":  func(o kindstore.Option) sliceStore { return kindstore.NewDeployments(o) },
	"statefulsets": func(o kindstore.Option) sliceStore { return kindstore.NewStatefulSets(o) },
	"daemonsets":   func(o kindstore.Option) sliceStore { return kindstore.NewDaemonSets(o) },
	"jobs":         func(o kindstore.Option) sliceStore { return kindstore.NewJobs(o) },
	"cronjobs":     func(o kindstore.Option) sliceStore { return kindstore.NewCronJobs(o) },
}

// newNodeView returns the node view of node, answering its pods from pods,
// the node from nodes and the rest of the node's slice from stores fed by
// slice (Run); opts are the Local side's other options (the watch ends).
// Each store has the bounds of the Kinds' stores.
func newNodeView(pods kubeapi.PodReader, node string, nodes *kindstore.Nodes, slice Slice, opts ...kubeapi.Option) (*nodeView, error) {
	v := &nodeView{slice: slice, stores: map[schema.GroupVersionResource]sliceStore{}}
	opts = append(opts, kubeapi.WithNodeView(), kubeapi.WithNode(nodes))
	for _, res := range workload.SliceResources() {
		newStore, ok := sliceStores[res.Resource]
		if !ok {
			return nil, fmt.Errorf("the node view has no store of %s", res)
		}
		st := newStore(kindstore.WithStoreOptions(store.WithHistory(kindHistory, kindHistoryBytes), store.WithBudget(budget.New(kindViewBytes))))
		v.stores[res] = st
		opts = append(opts, kubeapi.WithResource(res, st))
	}
	v.handler = kubeapi.New(pods, node, opts...)
	return v, nil
}

// Run feeds the stores from the slice until ctx is done, and marks them
// synced once the slice has.
func (v *nodeView) Run(ctx context.Context) {
	for res, st := range v.stores {
		remove := v.slice.AddEventHandler(res, st)
		defer remove()
	}
	if cache.WaitForCacheSync(ctx.Done(), v.slice.HasSynced) {
		for _, st := range v.stores {
			st.MarkSynced()
		}
	}
	<-ctx.Done()
}
