package store

import (
	"bytes"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// Object is one version of an object of a kind other than pods (a
// namespace, a node), as package kindstore writes it to a Store of its
// own: its identity, its protobuf encoding and what selectors match. Such
// a store holds objects of that kind only, each version a *Pod whose Raw is
// the object's encoding, and keeps the promises it keeps for pods:
// revisions, watchers with bounded queues, the bounded history, views
// encoded once, the memory budget. FindPods, the runtime's facts and the
// tombstones have nothing to do with it.
type Object struct {
	UID       types.UID
	Namespace string
	Name      string
	// Raw is the object's protobuf encoding; the store keeps it.
	Raw []byte
	// Labels and Fields are what label and field selectors match; the
	// store keeps them.
	Labels labels.Set
	Fields fields.Fields
}

// Put adds o or replaces the version of the object with the same UID, as
// Upsert does for a pod: a version whose encoding equals the current one
// is not a change, and one larger than WithMaxPodBytes is refused.
func (s *Store) Put(o Object) {
	if !s.checkSize(o.Namespace, o.Name, string(o.UID), o.Raw) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.pods[o.UID]
	if prev != nil && bytes.Equal(prev.raw, o.Raw) {
		return
	}
	s.version++
	p := &Pod{
		UID: o.UID, Namespace: o.Namespace, Name: o.Name, Version: s.version, raw: o.Raw,
		labels: o.Labels, objFields: o.Fields, budget: s.budget,
	}
	s.pods[o.UID] = p
	s.took(prev, p)
}

// Lookup returns the version of namespace and name among versions, sorted
// as List sorts them (by namespace, name and UID), and false when none is
// of that namespace and name.
func Lookup(versions []*Pod, namespace, name string) (*Pod, bool) {
	i, ok := slices.BinarySearchFunc(versions, [2]string{namespace, name}, func(p *Pod, k [2]string) int {
		if c := strings.Compare(p.Namespace, k[0]); c != 0 {
			return c
		}
		return strings.Compare(p.Name, k[1])
	})
	if !ok {
		return nil, false
	}
	return versions[i], true
}
