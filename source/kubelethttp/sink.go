package kubelethttp

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Sink receives the pods a Source reads. The pod store implements it.
//
// A Source calls a Sink from a single goroutine, the one running
// [Source.Run], so the sink sees one well-ordered sequence of calls.
type Sink interface {
	// Upsert adds the pod or replaces the pod with the same UID. The sink owns the pod afterwards; the source must not mutate it again.
	Upsert(pod *corev1.Pod)
	// Delete removes the pod with the given UID, if present.
	Delete(uid types.UID)
	// MarkSynced reports that the source has delivered its initial, complete state.
	MarkSynced()
}
