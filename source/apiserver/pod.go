package apiserver

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/podtypes"
)

// MirrorAnnotation is the annotation of the mirror pod a kubelet creates on
// the API server for a static pod; its value is the UID the kubelet gives
// the static pod itself.
const MirrorAnnotation = corev1.MirrorPodAnnotationKey

// servedPod returns pod as the Source serves it, changed in place: without
// its managed fields (the API server's bookkeeping of field owners, which
// no agent of the node needs and which would take most of each pod's
// bytes), and, for a mirror pod, under the UID of its static pod, so that
// agents see the UIDs a kubelet serves whichever source feeds podsapi; the
// mirror pod's own UID is kept in the annotation
// podtypes.MirrorPodUIDAnnotation, from which the Kubernetes API served by
// podsapi gives it back. It is idempotent.
func servedPod(pod *corev1.Pod) *corev1.Pod {
	pod.ManagedFields = nil
	if uid := pod.Annotations[MirrorAnnotation]; uid != "" && pod.UID != types.UID(uid) {
		pod.Annotations[podtypes.MirrorPodUIDAnnotation] = string(pod.UID)
		pod.UID = types.UID(uid)
	}
	return pod
}
