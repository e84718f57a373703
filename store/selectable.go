package store

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/podsapi/podsapi/podtypes"
)

// SelectableFields are the pod fields a field selector may name
// (podtypes.SelectableFields).
var SelectableFields = podtypes.SelectableFields

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
