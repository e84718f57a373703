package kindstore

import (
	"fmt"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/podsapi/podsapi/store"
)

// Object is what a Store holds: a typed object of k8s.io/api (a
// *corev1.Namespace, a *corev1.Node, a *appsv1.ReplicaSet, ...), which
// encodes itself in protobuf.
type Object interface {
	runtime.Object
	metav1.Object
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// Store holds the objects of one kind, each version encoded once. It is
// safe for concurrent use. The embedded store.Store is what kubeapi reads
// (List, Watch, WatchFrom, ReadHistory, Revision, Synced) and where
// MarkSynced is called. Create one with New.
type Store[T Object] struct {
	*store.Store
	resource  string
	newObject func() T
	fieldsOf  func(T) fields.Set
	onError   func(error)
	contact
}

// Option configures New.
type Option func(*settings)

type settings struct {
	store   []store.Option
	onError func(error)
}

// WithStoreOptions sets the options of the underlying store.Store: its
// history (store.WithHistory), the bound of one object's encoding
// (store.WithMaxPodBytes) and its memory budget (store.WithBudget). By
// default those are store.New's.
func WithStoreOptions(opts ...store.Option) Option {
	return func(s *settings) { s.store = append(s.store, opts...) }
}

// WithErrorHandler sets the function told about objects the store could
// not take (one that does not encode, or is over the bound of its bytes).
// By default such errors are dropped.
func WithErrorHandler(f func(error)) Option {
	return func(s *settings) { s.onError = f }
}

// New returns an empty, not yet synced Store of the kind whose resource
// is named resource ("namespaces"), whose empty objects newObject makes,
// and whose selectable fields fieldsOf computes (the API server's field
// labels of the kind, with its values).
func New[T Object](resource string, newObject func() T, fieldsOf func(T) fields.Set, opts ...Option) *Store[T] {
	set := settings{onError: func(error) {}}
	for _, o := range opts {
		o(&set)
	}
	// No tombstones: they serve FindPods, which reads pods only.
	stOpts := append([]store.Option{store.WithDeletedPods(-1, -1, -1), store.WithErrorHandler(set.onError)}, set.store...)
	s := &Store[T]{
		Store:     store.New(stOpts...),
		resource:  resource,
		newObject: newObject,
		fieldsOf:  fieldsOf,
		onError:   set.onError,
	}
	s.contact.init()
	return s
}

// Resource returns the name of the kind's resource ("namespaces").
func (s *Store[T]) Resource() string { return s.resource }

// OnAdd takes obj, an object of the kind. It is cache.ResourceEventHandler's.
func (s *Store[T]) OnAdd(obj any, _ bool) { s.put(obj) }

// OnUpdate takes newObj, the object's new version.
func (s *Store[T]) OnUpdate(_, newObj any) { s.put(newObj) }

// OnDelete removes obj (or the object of a cache.DeletedFinalStateUnknown).
func (s *Store[T]) OnDelete(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o, ok := obj.(T)
	if !ok {
		s.onError(fmt.Errorf("kindstore %s: deleted object of type %T", s.resource, obj))
		return
	}
	s.Store.Delete(o.GetUID())
}

// put encodes a version of an object and stores it, without its
// resourceVersion and managed fields.
func (s *Store[T]) put(obj any) {
	o, ok := obj.(T)
	if !ok {
		s.onError(fmt.Errorf("kindstore %s: object of type %T", s.resource, obj))
		return
	}
	// The informer's object is shared with its other readers: the copy is
	// podsapi's to change.
	c, ok := o.DeepCopyObject().(T)
	if !ok {
		s.onError(fmt.Errorf("kindstore %s: a copy of %T is not one", s.resource, obj))
		return
	}
	c.SetResourceVersion("")
	c.SetManagedFields(nil)
	raw, err := c.Marshal()
	if err != nil {
		s.onError(fmt.Errorf("kindstore %s: encode %s: %w", s.resource, c.GetName(), err))
		return
	}
	s.Store.Put(store.Object{
		UID: c.GetUID(), Namespace: c.GetNamespace(), Name: c.GetName(), Raw: raw,
		Labels: labels.Set(maps.Clone(c.GetLabels())), Fields: s.fieldsOf(c),
	})
}

var _ cache.ResourceEventHandler = (*Store[Object])(nil)
