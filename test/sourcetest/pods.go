package sourcetest

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Pod returns a small running pod of the node "node-1" with the given
// namespace, name and UID, in phase.
func Pod(namespace, name string, uid types.UID, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      name,
			UID:       uid,
			Labels:    map[string]string{"app": name, "tier": "backend", "zone": "a"},
		},
		Spec: corev1.PodSpec{
			NodeName:   "node-1",
			Containers: []corev1.Container{{Name: "main", Image: "registry.example/" + name + ":1"}},
		},
		Status: corev1.PodStatus{Phase: phase},
	}
}
