package service

import (
	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/types"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/workload"
)

// Workloads tells the workload of a pod of the node. *workload.Resolver
// implements it.
type Workloads interface {
	// Workload returns the workload of the pod uid, and false when it
	// knows none.
	Workload(uid types.UID) (workload.Workload, bool)
}

// WithWorkloads makes FindPods and GetPod answer the workload of each pod
// they return (PodMatch.workload, PodGetResponse.workload) from w. By
// default no workload is answered.
func WithWorkloads(w Workloads) Option {
	return func(h *handler) { h.workloads = w }
}

// The numbers of the fields of PodMatch.workload, PodGetResponse.workload
// and PodWorkload.
const (
	matchWorkloadField      protowire.Number = 6
	getWorkloadField        protowire.Number = 2
	workloadKindField       protowire.Number = 1
	workloadNameField       protowire.Number = 2
	workloadResolutionField protowire.Number = 3
)

// resolutions are the wire values of the workload.Resolution values.
var resolutions = map[workload.Resolution]podsv1alpha1.WorkloadResolution{
	workload.Resolved:   podsv1alpha1.WorkloadResolution_WORKLOAD_RESOLUTION_RESOLVED,
	workload.Derived:    podsv1alpha1.WorkloadResolution_WORKLOAD_RESOLUTION_DERIVED,
	workload.Unresolved: podsv1alpha1.WorkloadResolution_WORKLOAD_RESOLUTION_UNRESOLVED,
}

// appendWorkload appends the encoding of a PodWorkload (the message, not
// its tag and length).
func appendWorkload(b []byte, w workload.Workload) []byte {
	if w.Kind != "" {
		b = protowire.AppendTag(b, workloadKindField, protowire.BytesType)
		b = protowire.AppendString(b, w.Kind)
	}
	if w.Name != "" {
		b = protowire.AppendTag(b, workloadNameField, protowire.BytesType)
		b = protowire.AppendString(b, w.Name)
	}
	b = protowire.AppendTag(b, workloadResolutionField, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(resolutions[w.Resolution]))
}

// workloadOf returns the encoded PodWorkload of the pod uid, or nil when the
// handler answers none.
func (h *handler) workloadOf(uid types.UID) []byte {
	if h.workloads == nil {
		return nil
	}
	w, ok := h.workloads.Workload(uid)
	if !ok {
		return nil
	}
	return appendWorkload(nil, w)
}
