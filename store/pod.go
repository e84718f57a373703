package store

import (
	"sync"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/budget"
	"github.com/podsapi/podsapi/podtypes"
)

// maxViews bounds the number of views a Pod caches, so that clients sending
// many distinct field masks cannot make the server's memory grow without
// bound. Views beyond it are computed on every use.
const maxViews = 32

// Pod is one immutable version of a pod, encoded once.
type Pod struct {
	// UID is the pod's metadata.uid.
	UID types.UID
	// Namespace is the pod's metadata.namespace.
	Namespace string
	// Name is the pod's metadata.name.
	Name string
	// Version is the store-wide sequence number at which this version of the
	// pod was written. It grows with every change of the store.
	Version uint64

	raw []byte

	// labels and fields are what selectors match, computed once per
	// version when the store takes the pod.
	labels labels.Set
	fields podtypes.Fields
	// objFields are the selectable fields of an Object (Put); nil for a
	// pod.
	objFields fields.Fields
	// keys are what Find looks the version up by (find.go).
	keys podKeys

	// budget is the store's budget for the bytes of the views the version
	// caches (WithBudget); nil counts nothing.
	budget *budget.Budget

	mu    sync.Mutex
	views map[string]*view
	// viewBytes are the bytes of views counted against budget.
	viewBytes int64
	// shedded says the version has left the queues of the live watchers
	// (history.shedViews): its views are computed, not kept.
	shedded bool
}

// shed drops the views of p and keeps no more.
func (p *Pod) shed() {
	p.mu.Lock()
	n := p.viewBytes
	p.views, p.shedded, p.viewBytes = nil, true, 0
	p.mu.Unlock()
	p.budget.Release(budget.Views, n)
}

// view is a lazily computed, shared derivation of a Pod's encoding.
type view struct {
	once sync.Once
	b    []byte
	err  error
}

// Raw returns the protobuf encoding of the pod (a k8s.io.api.core.v1.Pod).
// The caller must not modify it.
func (p *Pod) Raw() []byte { return p.raw }

// Labels returns the pod's labels, for label selectors. The caller must not
// modify them.
func (p *Pod) Labels() labels.Labels { return p.labels }

// Fields returns the pod's selectable fields (SelectableFields), or an
// Object's, for field selectors.
func (p *Pod) Fields() fields.Fields {
	if p.objFields != nil {
		return p.objFields
	}
	return p.fields
}

// View returns the view of the pod named key, computing it with compute from
// the pod's encoding on first use and sharing the result with every later
// caller of the same key. compute is called at most once per key while the
// pod caches fewer than maxViews views; beyond that, views are computed for
// each call, and so are views the memory budget has no room for
// (WithBudget). The caller must not modify the returned bytes.
func (p *Pod) View(key string, compute func(raw []byte) ([]byte, error)) ([]byte, error) {
	p.mu.Lock()
	v, ok := p.views[key]
	if !ok && len(p.views) < maxViews && !p.shedded {
		if p.views == nil {
			p.views = make(map[string]*view)
		}
		v = &view{}
		p.views[key] = v
		ok = true
	}
	p.mu.Unlock()
	if !ok {
		return compute(p.raw)
	}
	v.once.Do(func() {
		v.b, v.err = compute(p.raw)
		p.count(key, v)
	})
	return v.b, v.err
}

// count counts the bytes of the view v of key, just computed, against the
// budget, and stops caching it when they do not fit: the callers waiting for
// it share it, later ones compute it again.
func (p *Pod) count(key string, v *view) {
	n := int64(cap(v.b)) + viewOverhead
	b := p.budget
	fits := b.Reserve(budget.Views, n)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case fits && !p.shedded && p.views[key] == v:
		p.viewBytes += n
		return
	case p.views[key] == v:
		delete(p.views, key)
	}
	if fits {
		b.Release(budget.Views, n)
	}
}

// viewOverhead is what a cached view costs beside its bytes: its key, entry
// and map slot, rounded up.
const viewOverhead = 128
