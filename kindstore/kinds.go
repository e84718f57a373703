package kindstore

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// Namespaces is a Store of namespaces.
type Namespaces = Store[*corev1.Namespace]

// Nodes is a Store of nodes.
type Nodes = Store[*corev1.Node]

// NewNamespaces returns a Store of namespaces.
func NewNamespaces(opts ...Option) *Namespaces {
	return New("namespaces", func() *corev1.Namespace { return &corev1.Namespace{} }, NamespaceFields, opts...)
}

// NewNodes returns a Store of nodes.
func NewNodes(opts ...Option) *Nodes {
	return New("nodes", func() *corev1.Node { return &corev1.Node{} }, NodeFields, opts...)
}

// NamespaceFields returns the fields of ns that a field selector may name,
// as the API server's namespace registry sets them
// (k8s.io/kubernetes pkg/registry/core/namespace: metadata.name,
// status.phase).
func NamespaceFields(ns *corev1.Namespace) fields.Set {
	// "name" too, as the registry keeps it (no field label converts to it).
	return fields.Set{"metadata.name": ns.Name, "status.phase": string(ns.Status.Phase), "name": ns.Name}
}

// NodeFields returns the fields of node that a field selector may name, as
// the API server's node registry sets them (k8s.io/kubernetes
// pkg/registry/core/node: metadata.name, spec.unschedulable).
func NodeFields(node *corev1.Node) fields.Set {
	return fields.Set{"metadata.name": node.Name, "spec.unschedulable": strconv.FormatBool(node.Spec.Unschedulable)}
}
