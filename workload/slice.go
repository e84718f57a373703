package workload

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// KindNamespace is the kind of the namespaces of the node's slice.
const KindNamespace = "Namespace"

// resources are the resources of the kinds a Resolver gets, by kind: the
// ReplicaSets and Jobs of the node's pods, and, with WithSlice, the rest of
// the node's slice.
var resources = map[string]schema.GroupVersionResource{
	KindReplicaSet:  {Group: "apps", Version: "v1", Resource: "replicasets"},
	KindDeployment:  {Group: "apps", Version: "v1", Resource: "deployments"},
	KindStatefulSet: {Group: "apps", Version: "v1", Resource: "statefulsets"},
	KindDaemonSet:   {Group: "apps", Version: "v1", Resource: "daemonsets"},
	KindJob:         {Group: "batch", Version: "v1", Resource: "jobs"},
	KindCronJob:     {Group: "batch", Version: "v1", Resource: "cronjobs"},
	KindNamespace:   namespaces,
}

// namespaces is the resource of the namespaces.
var namespaces = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// SliceResources returns the resources of the node's slice that a Resolver
// with WithSlice keeps and tells its event handlers of (AddEventHandler):
// ReplicaSets, Deployments, StatefulSets, DaemonSets, Jobs, CronJobs and
// Namespaces. The node's pods and the node itself are not among them.
func SliceResources() []schema.GroupVersionResource {
	out := make([]schema.GroupVersionResource, 0, len(resources))
	for _, kind := range []string{KindReplicaSet, KindDeployment, KindStatefulSet, KindDaemonSet, KindJob, KindCronJob, KindNamespace} {
		out = append(out, resources[kind])
	}
	return out
}

// answersWorkload reports whether the entries of kind answer the workload
// of the pods they own: a ReplicaSet's or a Job's controller is.
func answersWorkload(kind string) bool { return kind == KindReplicaSet || kind == KindJob }

// inSlice reports whether a controller reference of apiVersion and kind
// names an object of the node's slice.
func inSlice(apiVersion, kind string) bool {
	r, ok := resources[kind]
	return ok && kind != KindNamespace && apiGroup(apiVersion) == r.Group
}

// slice is the state of a Resolver's node's slice (WithSlice): the whole
// objects of every owner of the node's pods up the chain (Pod → ReplicaSet
// → Deployment, Pod → Job → CronJob, Pod → StatefulSet, Pod → DaemonSet)
// and of the namespaces that hold them, each got with one get and asked
// again every refresh interval, as the ReplicaSets and Jobs are, kept while
// a pod of the node (or, for a Deployment or CronJob, an entry of the
// slice) holds it, and the event handlers told of them.
type slice struct {
	on bool
	// namespaces, when set, gets the namespaces instead of the Getter.
	namespaces Getter
	// podsSynced says the pod source delivered its first state (the
	// Sink's MarkSynced).
	podsSynced bool
	// parents are the entries whose controller found no room among the
	// owners, with that controller's key.
	parents map[ownerKey]ownerKey
	// orphans are the controllers' entries whose last child let go of
	// them, dropped at the end of the next Sync unless a child holds them
	// again by then: a pod that moves to its Deployment's new ReplicaSet
	// does not drop the Deployment and get it again.
	orphans map[ownerKey]struct{}
	// queue are the events not delivered yet, in order, under r.mu.
	queue []sliceEvent

	// deliverMu orders the deliveries: held while handlers are called,
	// and taken before r.mu.
	deliverMu sync.Mutex
	handlers  map[schema.GroupVersionResource]map[uint64]cache.ResourceEventHandler
	nextKey   uint64
}

// sliceEvent is an event of the node's slice to deliver: old is nil for an
// add, new for a delete.
type sliceEvent struct {
	resource schema.GroupVersionResource
	old, new Object
}

// WithSlice makes the Resolver keep the node's slice: the objects of every
// owner of the node's pods up the chain (ReplicaSet and Deployment, Job and
// CronJob, StatefulSet, DaemonSet) and of the namespaces that hold the
// node's pods, as its Getter answers them (whole with NewObjectGetter), one
// get per object, asked again every refresh interval, kept while a pod of
// the node references them, never a list or a watch of a kind; and tell the
// event handlers of AddEventHandler. Its objects count against
// WithMaxOwners. The default keeps only the workloads' answers.
func WithSlice() Option { return func(r *Resolver) { r.slice.on = true } }

// NamespaceGetter answers a namespace (namespace "") by name from memory,
// and false when it holds none: the full view's store of namespaces
// (kindstore's Store.Get, fed by the door's one shared watch) satisfies it.
type NamespaceGetter interface {
	Get(namespace, name string) (*corev1.Namespace, bool, error)
}

// WithNamespaces makes a Resolver with WithSlice read the namespaces of the
// node's pods from g instead of getting them from the API server: a view
// that already shares an informer of namespaces costs the API server no
// get. The informer's handler calls Recheck on a change, so that it is told
// at once rather than at the next refresh. The default gets them with the
// Resolver's Getter.
func WithNamespaces(g NamespaceGetter) Option {
	return func(r *Resolver) { r.slice.namespaces = namespaceLister{g} }
}

// namespaceLister is the Getter of a NamespaceGetter.
type namespaceLister struct{ g NamespaceGetter }

func (l namespaceLister) Get(_ context.Context, resource schema.GroupVersionResource, _, name string) (Object, error) {
	ns, ok, err := l.g.Get("", name)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, apierrors.NewNotFound(resource.GroupResource(), name)
	}
	return ns, nil
}

// Recheck has the Resolver ask again, at once, about the objects of the
// node's slice of resource in namespace ("" for a namespace) named name,
// when it holds any: a view whose informer saw the object change calls it,
// so that the Resolver's handlers are told without waiting for the refresh.
func (r *Resolver) Recheck(resource schema.GroupVersionResource, namespace, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, e := range r.owners {
		if key.namespace == namespace && key.name == name && resources[key.kind] == resource {
			e.recheck = true
			r.signal()
		}
	}
}

// keysOf returns the keys of the entries pod holds: its owner's (the
// ReplicaSet or Job of its workload, owner) and, with WithSlice, its
// controller's when the controller is of the slice, and its namespace's.
func (r *Resolver) keysOf(pod *corev1.Pod, owner *ownerKey) []ownerKey {
	var keys []ownerKey
	if owner != nil {
		keys = append(keys, *owner)
	}
	if !r.slice.on {
		return keys
	}
	if ref := controllerOf(pod.OwnerReferences); ref != nil && inSlice(ref.APIVersion, ref.Kind) && owner == nil {
		keys = append(keys, ownerKey{kind: ref.Kind, namespace: pod.Namespace, name: ref.Name, uid: ref.UID})
	}
	if pod.Namespace != "" {
		keys = append(keys, ownerKey{kind: KindNamespace, name: pod.Namespace})
	}
	return keys
}

// keep takes obj, the object of e the API server answered, and tells the
// event handlers: added the first time, updated when its resourceVersion
// changed. A ReplicaSet or Job then holds the entry of its controller, a
// Deployment or CronJob, which is of the slice too. r.mu is held.
func (r *Resolver) keep(key ownerKey, e *entry, obj Object) {
	if !r.slice.on {
		return
	}
	old := e.obj
	e.obj = obj
	switch {
	case !e.told:
		e.told = true
		r.slice.queue = append(r.slice.queue, sliceEvent{resource: resources[key.kind], new: obj})
	case changed(old, obj):
		r.slice.queue = append(r.slice.queue, sliceEvent{resource: resources[key.kind], old: old, new: obj})
	}
	if !answersWorkload(key.kind) {
		return
	}
	var parent *ownerKey
	if ref := controllerOf(obj.GetOwnerReferences()); ref != nil && inSlice(ref.APIVersion, ref.Kind) {
		parent = &ownerKey{kind: ref.Kind, namespace: key.namespace, name: ref.Name, uid: ref.UID}
	}
	r.setParent(key, e, parent)
}

// changed reports whether obj is another version than old: another
// resourceVersion, or, from a getter that keeps none (a view's store),
// other contents.
func changed(old, obj Object) bool {
	if old.GetResourceVersion() != "" || obj.GetResourceVersion() != "" {
		return old.GetResourceVersion() != obj.GetResourceVersion()
	}
	return !equality.Semantic.DeepEqual(old, obj)
}

// untell tells the event handlers that e's object is deleted, when they
// were told of it, and forgets it. r.mu is held.
func (r *Resolver) untell(key ownerKey, e *entry) {
	if e.told {
		r.slice.queue = append(r.slice.queue, sliceEvent{resource: resources[key.kind], old: e.obj})
	}
	e.obj, e.told = nil, false
}

// setParent makes e, the entry of key, hold the entry of its controller
// parent (nil: none) instead of the one it held, which it lets go of (and
// drops when nothing else holds it). A controller with no room among the
// owners waits (admitParents). r.mu is held.
func (r *Resolver) setParent(key ownerKey, e *entry, parent *ownerKey) {
	if waiting, ok := r.slice.parents[key]; ok && (parent == nil || waiting != *parent) {
		delete(r.slice.parents, key)
	}
	if e.parent != nil && (parent == nil || *e.parent != *parent) {
		old := *e.parent
		e.parent = nil
		if pe := r.owners[old]; pe != nil {
			delete(pe.children, key)
			if len(pe.children) == 0 && len(pe.pods) == 0 {
				if r.slice.orphans == nil {
					r.slice.orphans = map[ownerKey]struct{}{}
				}
				r.slice.orphans[old] = struct{}{}
				r.signal()
			}
		}
	}
	if parent == nil || e.parent != nil {
		return
	}
	pe := r.entryFor(*parent)
	if pe == nil {
		if r.slice.parents == nil {
			r.slice.parents = map[ownerKey]ownerKey{}
		}
		r.slice.parents[key] = *parent
		return
	}
	delete(r.slice.parents, key)
	pe.children[key] = struct{}{}
	e.parent = parent
}

// dropOrphans drops the controllers' entries that no child held again
// since their last let go of them, and reports whether it dropped any.
// r.mu is held.
func (r *Resolver) dropOrphans() bool {
	freed := false
	for key := range r.slice.orphans {
		delete(r.slice.orphans, key)
		if e := r.owners[key]; e != nil {
			freed = r.dropIfFree(key, e) || freed
		}
	}
	return freed
}

// admitParents links the entries that waited for room to their
// controllers' entries, as far as there is room. r.mu is held.
func (r *Resolver) admitParents() {
	for key, parent := range r.slice.parents {
		e := r.owners[key]
		if e == nil {
			delete(r.slice.parents, key)
			continue
		}
		r.setParent(key, e, &parent)
	}
}

// deliver calls the event handlers with the events queued, in order, outside
// r.mu.
func (r *Resolver) deliver() {
	if !r.slice.on {
		return
	}
	r.slice.deliverMu.Lock()
	defer r.slice.deliverMu.Unlock()
	r.drain()
}

// drain delivers the events queued. r.slice.deliverMu is held.
func (r *Resolver) drain() {
	for {
		r.mu.Lock()
		queue := r.slice.queue
		r.slice.queue = nil
		r.mu.Unlock()
		if len(queue) == 0 {
			return
		}
		for _, ev := range queue {
			for _, h := range r.slice.handlers[ev.resource] {
				switch {
				case ev.old == nil:
					h.OnAdd(ev.new, false)
				case ev.new == nil:
					h.OnDelete(ev.old)
				default:
					h.OnUpdate(ev.old, ev.new)
				}
			}
		}
	}
}

// AddEventHandler tells h of the objects of resource (one of
// SliceResources) in the node's slice, as an informer's handler is told:
// OnAdd (isInInitialList) at once for each object held, then OnAdd when the
// API server first answers an object that a pod of the node came to hold,
// OnUpdate when an answer has another resourceVersion (within the refresh
// interval of the change), and OnDelete, with the last object answered,
// when the last pod that held it left the node or the API server says it is
// gone. Nothing is told while the API server is unreachable: the objects
// are kept as they were (Age says how old). The objects are shared: h must
// not modify them. h is called outside the Resolver's lock, one event at a
// time, in order; it must not block, and must not call remove. Without
// WithSlice, h is never called. remove stops the events.
func (r *Resolver) AddEventHandler(resource schema.GroupVersionResource, h cache.ResourceEventHandler) (remove func()) {
	r.slice.deliverMu.Lock()
	defer r.slice.deliverMu.Unlock()
	r.drain()
	r.mu.Lock()
	var held []Object
	for key, e := range r.owners {
		if e.told && resources[key.kind] == resource {
			held = append(held, e.obj)
		}
	}
	if r.slice.handlers == nil {
		r.slice.handlers = map[schema.GroupVersionResource]map[uint64]cache.ResourceEventHandler{}
	}
	if r.slice.handlers[resource] == nil {
		r.slice.handlers[resource] = map[uint64]cache.ResourceEventHandler{}
	}
	key := r.slice.nextKey
	r.slice.nextKey++
	r.slice.handlers[resource][key] = h
	r.mu.Unlock()
	for _, obj := range held {
		h.OnAdd(obj, true)
	}
	return func() {
		r.slice.deliverMu.Lock()
		defer r.slice.deliverMu.Unlock()
		delete(r.slice.handlers[resource], key)
	}
}

// HasSynced reports whether the node's slice is complete as far as the API
// server answered: the pod source delivered its first state (the Sink's
// MarkSynced), and every object its pods hold was asked about at least once
// (answered, or failed while the API server is unreachable).
func (r *Resolver) HasSynced() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.slice.podsSynced {
		return false
	}
	for _, e := range r.owners {
		if e.checked.IsZero() {
			return false
		}
	}
	return true
}

// markSynced notes that the pod source delivered its first state.
func (r *Resolver) markSynced() {
	r.mu.Lock()
	r.slice.podsSynced = true
	r.mu.Unlock()
}

// Age returns how long ago the API server last confirmed the oldest object
// of the node's slice the Resolver holds (0 when it holds none): about the
// refresh interval while the API server answers, growing while it is
// unreachable.
func (r *Resolver) Age() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	var age time.Duration
	for _, e := range r.owners {
		if e.told {
			age = max(age, now.Sub(e.confirmed))
		}
	}
	return age
}
