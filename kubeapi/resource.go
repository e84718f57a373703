package kubeapi

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/podsapi/podsapi/internal/kindtable"
	"github.com/podsapi/podsapi/internal/podtable"
	"github.com/podsapi/podsapi/podtypes"
	"github.com/podsapi/podsapi/store"
)

// resource is one collection of objects the handler serves, with what
// differs between them: the node's pods (from podsapi's store), the
// namespaces (WithNamespaces), the node (WithNode) and the owner kinds
// (WithResource), each from a store of its own. Lists, gets, watches,
// their forms and encodings are the same code for all.
type resource struct {
	// group is the resource's API group ("" for core, "apps", "batch"),
	// name the resource ("pods"), kind its kind ("Pod"). Every resource
	// served is of version v1.
	group, name, kind string
	reader            PodReader
	// decode returns the object of a stored encoding, with the
	// resourceVersion rv.
	decode func(raw []byte, rv string) (object, error)
	// empty returns an object of the kind with no content (a bookmark's).
	empty func() object
	// fieldLabel is the API server's conversion of the kind's field
	// labels: the labels a field selector may name.
	fieldLabel func(label, value string) (string, string, error)
	// columns are the API server's table columns of the kind, rowOf the
	// row of an object.
	columns func() []metav1.TableColumnDefinition
	rowOf   func(object) tableCells
}

// object is an object of a kind the handler serves (a *corev1.Pod, a
// *corev1.Namespace, a *corev1.Node, a *appsv1.ReplicaSet, ...).
type object interface {
	runtime.Object
	metav1.ObjectMetaAccessor
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// tableCells is a row of a table, but for the time at which it is shown
// (podtable.Row, kindtable.NamespaceRow, kindtable.ReplicaSetRow, ...).
type tableCells interface {
	Cells(now time.Time) []any
	Conditions() []metav1.TableRowCondition
}

// podsResource is the node's pods.
func podsResource(pods PodReader) *resource {
	return &resource{
		name: "pods", kind: "Pod", reader: pods,
		decode:     func(raw []byte, rv string) (object, error) { return decode(raw, rv) },
		empty:      func() object { return &corev1.Pod{} },
		fieldLabel: podFieldLabel,
		columns:    podtable.Columns,
		rowOf:      func(o object) tableCells { return podtable.RowOf(o.(*corev1.Pod)) },
	}
}

// namespacesResource is the namespaces of the store r.
func namespacesResource(r PodReader) *resource {
	return kindResource(corev1.SchemeGroupVersion.WithResource("namespaces"), "Namespace", r, func() *corev1.Namespace { return &corev1.Namespace{} },
		fieldLabels("metadata.name", "status.phase"), kindtable.NamespaceColumns, func(ns *corev1.Namespace) tableCells { return kindtable.NamespaceRowOf(ns) })
}

// nodesResource is the nodes of the store r.
func nodesResource(r PodReader) *resource {
	return kindResource(corev1.SchemeGroupVersion.WithResource("nodes"), "Node", r, func() *corev1.Node { return &corev1.Node{} },
		fieldLabels("metadata.name", "spec.unschedulable"), kindtable.NodeColumns, func(n *corev1.Node) tableCells { return kindtable.NodeRowOf(n) })
}

// kindResource is the resource gvr of kind, whose objects (made by
// newObject) the store r holds as their protobuf encodings, with the API
// server's conversion of its field labels (fieldLabel), its table's
// columns and rows.
func kindResource[T object](gvr schema.GroupVersionResource, kind string, r PodReader, newObject func() T,
	fieldLabel func(label, value string) (string, string, error),
	columns func() []metav1.TableColumnDefinition, rowOf func(T) tableCells) *resource {
	empty := func() object { return newObject() }
	return &resource{
		group: gvr.Group, name: gvr.Resource, kind: kind, reader: r, empty: empty, columns: columns, fieldLabel: fieldLabel,
		decode: func(raw []byte, rv string) (object, error) {
			o := empty()
			if err := o.Unmarshal(raw); err != nil {
				return nil, fmt.Errorf("decode stored object: %w", err)
			}
			o.GetObjectMeta().SetResourceVersion(rv)
			return o, nil
		},
		rowOf: func(o object) tableCells { return rowOf(o.(T)) },
	}
}

// fieldLabels returns the conversion of field labels that accepts labels
// as they are and refuses every other, as the API server's conversions of
// the core kinds do (k8s.io/kubernetes pkg/apis/core/v1:
// AddFieldLabelConversionsForNamespace, for Node).
func fieldLabels(labels ...string) func(label, value string) (string, string, error) {
	return func(label, value string) (string, string, error) {
		if slices.Contains(labels, label) {
			return label, value, nil
		}
		return "", "", fmt.Errorf("field label not supported: %s", label)
	}
}

// podFieldLabel is the API server's conversion of the field labels of pods
// (k8s.io/kubernetes pkg/apis/core/v1, AddFieldLabelConversionsForPod):
// the selectable fields, status.podIPs, and spec.host for spec.nodeName.
func podFieldLabel(label, value string) (string, string, error) {
	switch {
	case label == "spec.host":
		return "spec.nodeName", value, nil
	case label == "status.podIPs", slices.Contains(podtypes.SelectableFields, label):
		return label, value, nil
	}
	return "", "", fmt.Errorf("field label not supported: %s", label)
}

// find returns the current version of the object of namespace and name.
func (res *resource) find(namespace, name string) (*store.Pod, bool) {
	_, objs := res.reader.List()
	return store.Lookup(objs, namespace, name)
}

// listKind is the kind of the resource's lists ("PodList").
func (res *resource) listKind() string { return res.kind + "List" }

// groupResource is the resource's group and name.
func (res *resource) groupResource() schema.GroupResource {
	return schema.GroupResource{Group: res.group, Resource: res.name}
}

// groupVersion is the group version of the resource's objects and lists.
func (res *resource) groupVersion() schema.GroupVersion {
	return schema.GroupVersion{Group: res.group, Version: "v1"}
}

// apiVersion is the apiVersion of the resource's objects and lists ("v1",
// "apps/v1").
func (res *resource) apiVersion() string { return res.groupVersion().String() }

// internalType is the Go type the API server names in its messages about
// the resource's objects, of its internal API package ("core.Pod",
// "apps.ReplicaSet").
func (res *resource) internalType(kind string) string {
	if res.group == "" {
		return "core." + kind
	}
	return res.group + "." + kind
}
