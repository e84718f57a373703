package kindstore

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
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

// The stores of the owner kinds of pods (the kinds agents read to name a
// pod's workload).
type (
	// ReplicaSets is a Store of apps/v1 ReplicaSets.
	ReplicaSets = Store[*appsv1.ReplicaSet]
	// Deployments is a Store of apps/v1 Deployments.
	Deployments = Store[*appsv1.Deployment]
	// StatefulSets is a Store of apps/v1 StatefulSets.
	StatefulSets = Store[*appsv1.StatefulSet]
	// DaemonSets is a Store of apps/v1 DaemonSets.
	DaemonSets = Store[*appsv1.DaemonSet]
	// Jobs is a Store of batch/v1 Jobs.
	Jobs = Store[*batchv1.Job]
	// CronJobs is a Store of batch/v1 CronJobs.
	CronJobs = Store[*batchv1.CronJob]
)

// NewReplicaSets returns a Store of ReplicaSets.
func NewReplicaSets(opts ...Option) *ReplicaSets {
	return New("replicasets", func() *appsv1.ReplicaSet { return &appsv1.ReplicaSet{} }, ReplicaSetFields, opts...)
}

// NewDeployments returns a Store of Deployments.
func NewDeployments(opts ...Option) *Deployments {
	return New("deployments", func() *appsv1.Deployment { return &appsv1.Deployment{} }, MetaFields[*appsv1.Deployment], opts...)
}

// NewStatefulSets returns a Store of StatefulSets.
func NewStatefulSets(opts ...Option) *StatefulSets {
	return New("statefulsets", func() *appsv1.StatefulSet { return &appsv1.StatefulSet{} }, MetaFields[*appsv1.StatefulSet], opts...)
}

// NewDaemonSets returns a Store of DaemonSets.
func NewDaemonSets(opts ...Option) *DaemonSets {
	return New("daemonsets", func() *appsv1.DaemonSet { return &appsv1.DaemonSet{} }, MetaFields[*appsv1.DaemonSet], opts...)
}

// NewJobs returns a Store of Jobs.
func NewJobs(opts ...Option) *Jobs {
	return New("jobs", func() *batchv1.Job { return &batchv1.Job{} }, JobFields, opts...)
}

// NewCronJobs returns a Store of CronJobs.
func NewCronJobs(opts ...Option) *CronJobs {
	return New("cronjobs", func() *batchv1.CronJob { return &batchv1.CronJob{} }, MetaFields[*batchv1.CronJob], opts...)
}

// MetaFields returns the fields of o, an object of a namespaced kind, that
// a field selector may name, as the API server's registries of the kinds
// with no fields of their own set them (k8s.io/apiserver
// pkg/registry/generic: DefaultNamespaceScopedAttr, metadata.name and
// metadata.namespace).
func MetaFields[T Object](o T) fields.Set {
	return fields.Set{"metadata.name": o.GetName(), "metadata.namespace": o.GetNamespace()}
}

// ReplicaSetFields returns the fields of rs that a field selector may
// name, as the API server's ReplicaSet registry sets them
// (k8s.io/kubernetes pkg/registry/apps/replicaset: ToSelectableFields,
// status.replicas beside the metadata's; apps/v1's field label conversion
// accepts only the metadata's).
func ReplicaSetFields(rs *appsv1.ReplicaSet) fields.Set {
	set := MetaFields(rs)
	set["status.replicas"] = strconv.Itoa(int(rs.Status.Replicas))
	return set
}

// JobFields returns the fields of job that a field selector may name, as
// the API server's Job registry sets them (k8s.io/kubernetes
// pkg/registry/batch/job: JobToSelectableFields, status.successful beside
// the metadata's).
func JobFields(job *batchv1.Job) fields.Set {
	set := MetaFields(job)
	set["status.successful"] = strconv.Itoa(int(job.Status.Succeeded))
	return set
}
