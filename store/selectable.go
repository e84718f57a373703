package store

import (
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// SelectableFields are the pod fields a field selector may name: those the
// Kubernetes API server's pod field selectors support (k8s.io/kubernetes
// pkg/registry/core/pod, ToSelectableFields), with the same values.
var SelectableFields = []string{
	"metadata.name",
	"metadata.namespace",
	"spec.nodeName",
	"spec.restartPolicy",
	"spec.schedulerName",
	"spec.serviceAccountName",
	"spec.hostNetwork",
	"status.phase",
	"status.podIP",
	"status.nominatedNodeName",
}

// podFields are the selectable fields of one pod version, computed once when
// it is written. It implements k8s.io/apimachinery/pkg/fields.Fields.
type podFields struct {
	name, namespace                                 string
	nodeName, restartPolicy, schedulerName, account string
	hostNetwork                                     bool
	phase, podIP, nominatedNodeName                 string
}

func newPodFields(pod *corev1.Pod) podFields {
	f := podFields{
		name:              pod.Name,
		namespace:         pod.Namespace,
		nodeName:          pod.Spec.NodeName,
		restartPolicy:     string(pod.Spec.RestartPolicy),
		schedulerName:     pod.Spec.SchedulerName,
		account:           pod.Spec.ServiceAccountName,
		hostNetwork:       pod.Spec.HostNetwork,
		phase:             string(pod.Status.Phase),
		nominatedNodeName: pod.Status.NominatedNodeName,
	}
	// As the API server: the first of status.podIPs.
	if len(pod.Status.PodIPs) > 0 {
		f.podIP = pod.Status.PodIPs[0].IP
	}
	return f
}

// Has reports whether field is one of SelectableFields.
func (f podFields) Has(field string) bool {
	_, ok := f.get(field)
	return ok
}

// Get returns the value of field, or "" when it is not selectable.
func (f podFields) Get(field string) string {
	v, _ := f.get(field)
	return v
}

func (f podFields) get(field string) (string, bool) {
	switch field {
	case "metadata.name":
		return f.name, true
	case "metadata.namespace":
		return f.namespace, true
	case "spec.nodeName":
		return f.nodeName, true
	case "spec.restartPolicy":
		return f.restartPolicy, true
	case "spec.schedulerName":
		return f.schedulerName, true
	case "spec.serviceAccountName":
		return f.account, true
	case "spec.hostNetwork":
		return strconv.FormatBool(f.hostNetwork), true
	case "status.phase":
		return f.phase, true
	case "status.podIP":
		return f.podIP, true
	case "status.nominatedNodeName":
		return f.nominatedNodeName, true
	default:
		return "", false
	}
}

// podLabels returns the labels of pod as a labels.Set the store owns,
// sharing prev's when they are equal, so that a pod whose labels do not
// change keeps one copy across its versions.
func podLabels(pod *corev1.Pod, prev *Pod) labels.Set {
	if len(pod.Labels) == 0 {
		return nil
	}
	if prev != nil && maps.Equal(prev.labels, labels.Set(pod.Labels)) {
		return prev.labels
	}
	return maps.Clone(labels.Set(pod.Labels))
}
