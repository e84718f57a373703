package kindstore

import (
	"fmt"

	"github.com/podsapi/podsapi/store"
)

// Get returns the current version of the object of namespace ("" for a
// kind that has none) and name, decoded anew (the caller may change it),
// without a resourceVersion or managed fields, and false when the store
// does not hold it. A tracker of the node's slice (the node view) can get
// the namespaces of the node's pods from the full view's store so, with no
// request to the API server.
func (s *Store[T]) Get(namespace, name string) (T, bool, error) {
	var zero T
	_, objs := s.List()
	p, ok := store.Lookup(objs, namespace, name)
	if !ok {
		return zero, false, nil
	}
	o := s.newObject()
	if err := o.Unmarshal(p.Raw()); err != nil {
		return zero, false, fmt.Errorf("kindstore %s: decode %s: %w", s.resource, name, err)
	}
	return o, true, nil
}
