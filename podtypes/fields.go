package podtypes

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
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

// Fields are the selectable fields of one pod version. It implements
// k8s.io/apimachinery/pkg/fields.Fields, which field selectors match.
type Fields struct {
	name, namespace                                 string
	nodeName, restartPolicy, schedulerName, account string
	hostNetwork                                     bool
	phase, podIP, nominatedNodeName                 string
}

// FieldsOf returns the selectable fields of pod, with the API server's
// values: status.podIP is the first of status.podIPs.
func FieldsOf(pod *corev1.Pod) Fields {
	f := Fields{
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
	if len(pod.Status.PodIPs) > 0 {
		f.podIP = pod.Status.PodIPs[0].IP
	}
	return f
}

// Has reports whether field is one of SelectableFields.
func (f Fields) Has(field string) bool {
	_, ok := f.get(field)
	return ok
}

// Get returns the value of field, or "" when it is not selectable.
func (f Fields) Get(field string) string {
	v, _ := f.get(field)
	return v
}

func (f Fields) get(field string) (string, bool) {
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

// HostNetwork reports whether the pod uses the node's network (spec.hostNetwork).
func (f Fields) HostNetwork() bool { return f.hostNetwork }

// Phase returns the pod's status.phase.
func (f Fields) Phase() string { return f.phase }
