package workload

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kinds of workload a Resolver answers. Any other kind is the kind of
// the controller that owns the pod (or its ReplicaSet or Job), as it is.
const (
	KindDeployment  = "Deployment"
	KindReplicaSet  = "ReplicaSet"
	KindStatefulSet = "StatefulSet"
	KindDaemonSet   = "DaemonSet"
	KindCronJob     = "CronJob"
	KindJob         = "Job"
	KindNode        = "Node"
)

// Resolution says how far a Workload is known.
type Resolution int

const (
	// Resolved is a workload the pod itself tells (no owner, a StatefulSet,
	// a DaemonSet, the node of a static pod, another controller), or that
	// the API server confirmed within the Resolver's stale-after bound.
	Resolved Resolution = iota + 1
	// Derived is a workload derived from the names of the pod's owner and
	// its pod-template-hash label, not confirmed by the API server: without
	// one, or until it answers.
	Derived
	// Unresolved is a workload the Resolver cannot vouch for: the API
	// server has not answered about the pod's owner, the owner no longer
	// exists, or the last answer is older than the stale-after bound. Kind
	// and Name are then the last known answer, else the pod's immediate
	// owner.
	Unresolved
)

// String returns the resolution's name.
func (r Resolution) String() string {
	switch r {
	case Resolved:
		return "Resolved"
	case Derived:
		return "Derived"
	case Unresolved:
		return "Unresolved"
	default:
		return "Unknown"
	}
}

// Workload is the workload of a pod. A zero Kind with Resolution Resolved
// says the pod has no controller: it is a workload of its own.
type Workload struct {
	// Kind is the workload's kind: KindDeployment, KindStatefulSet, ..., or
	// "" for a pod without a controller.
	Kind string
	// Name is the workload's name, in the pod's namespace (a Node's name
	// for KindNode).
	Name string
	// Resolution says how far the workload is known.
	Resolution Resolution
}

// mirrorAnnotation marks a static pod's mirror pod (kubelet's
// kubetypes.ConfigMirrorAnnotationKey).
const mirrorAnnotation = "kubernetes.io/config.mirror"

// controllerOf returns the pod's controller owner reference, or nil.
func controllerOf(refs []metav1.OwnerReference) *metav1.OwnerReference {
	for i := range refs {
		if refs[i].Controller != nil && *refs[i].Controller {
			return &refs[i]
		}
	}
	return nil
}

// apiGroup returns the group of an ownerReference's apiVersion.
func apiGroup(apiVersion string) string {
	for i := 0; i < len(apiVersion); i++ {
		if apiVersion[i] == '/' {
			return apiVersion[:i]
		}
	}
	return ""
}

// direct returns the workload the pod alone tells, and, when the answer
// needs the pod's owner's own owner, the reference to ask about instead.
func direct(pod *corev1.Pod) (Workload, *metav1.OwnerReference) {
	ref := controllerOf(pod.OwnerReferences)
	if ref == nil {
		if _, ok := pod.Annotations[mirrorAnnotation]; ok && pod.Spec.NodeName != "" {
			return Workload{Kind: KindNode, Name: pod.Spec.NodeName, Resolution: Resolved}, nil
		}
		return Workload{Resolution: Resolved}, nil
	}
	switch {
	case ref.Kind == KindReplicaSet && apiGroup(ref.APIVersion) == "apps",
		ref.Kind == KindJob && apiGroup(ref.APIVersion) == "batch":
		return Workload{}, ref
	}
	return Workload{Kind: ref.Kind, Name: ref.Name, Resolution: Resolved}, nil
}

// fromOwner returns the workload of a pod whose controller, a ReplicaSet or
// a Job named name, has the owner references refs.
func fromOwner(kind, name string, refs []metav1.OwnerReference) Workload {
	if ref := controllerOf(refs); ref != nil {
		return Workload{Kind: ref.Kind, Name: ref.Name, Resolution: Resolved}
	}
	return Workload{Kind: kind, Name: name, Resolution: Resolved}
}
