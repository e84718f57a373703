package printer

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/client"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
)

// PrintMatches prints the pods FindPods found: the table of PrintList with
// a CONTAINER column after NAME ("<none>" when the key named no container)
// and, when the server answers workloads, a WORKLOAD column after it
// (WorkloadString),
// "(deleted)" after the STATUS of a deleted pod and "(runtime only)" after
// that of a pod only the container runtime told of (the server's
// --nri-socket: its pod has only a namespace, name and UID); for JSON and
// YAML a Kubernetes List of the pods, each with the
// podsapi.io/find-container, podsapi.io/find-deleted,
// podsapi.io/find-host-network, podsapi.io/find-runtime-only and
// podsapi.io/find-workload annotations when they apply; for Name, one pod/NAME per line.
func (p *Printer) PrintMatches(ms []client.Match) error {
	if p.workloads {
		// The matches have a WORKLOAD column of their own, after NAME.
		q := *p
		q.workloads = false
		return q.PrintMatches(ms)
	}
	switch p.format {
	case JSON, YAML, Name:
		pods := make([]*corev1.Pod, len(ms))
		for i, m := range ms {
			pods[i] = annotated(m)
		}
		return p.PrintList(pods)
	default:
		if len(ms) == 0 {
			return nil
		}
		h := p.headerRow(false)
		extra := []string{"CONTAINER"}
		workloads := slices.ContainsFunc(ms, func(m client.Match) bool { return m.Workload != nil })
		if workloads {
			extra = append(extra, "WORKLOAD")
		}
		rows := [][]string{append(h[:2:2], append(extra, h[2:]...)...)}
		for _, m := range ms {
			r := p.row(m.Pod, nil)
			container := m.Container
			if container == "" {
				container = "<none>"
			}
			if m.Deleted {
				r[3] += " (deleted)"
			}
			if runtimeOnly(m) {
				r[3] += " (runtime only)"
			}
			extra := []string{container}
			if workloads {
				extra = append(extra, WorkloadString(m.Workload))
			}
			rows = append(rows, append(r[:2:2], append(extra, r[2:]...)...))
		}
		return p.write(p.table.format(rows...))
	}
}

// WorkloadString returns the WORKLOAD column of a match: "KIND/NAME",
// followed by " (derived)" or " (unresolved)" when not resolved, "<none>"
// for a pod without a controller, "<unknown>" when the server answered
// none.
func WorkloadString(w *podsv1alpha1.PodWorkload) string {
	if w == nil {
		return "<unknown>"
	}
	s := "<none>"
	if w.GetKind() != "" {
		s = w.GetKind() + "/" + w.GetName()
	}
	switch w.GetResolution() {
	case podsv1alpha1.WorkloadResolution_WORKLOAD_RESOLUTION_DERIVED:
		s += " (derived)"
	case podsv1alpha1.WorkloadResolution_WORKLOAD_RESOLUTION_UNRESOLVED:
		s += " (unresolved)"
	}
	return s
}

// The annotations PrintMatches adds to the pods it prints as objects.
const (
	// AnnotationWorkload is the match's workload, as the WORKLOAD
	// column prints it (WorkloadString).
	AnnotationWorkload    = "podsapi.io/find-workload"
	AnnotationContainer   = "podsapi.io/find-container"
	AnnotationDeleted     = "podsapi.io/find-deleted"
	AnnotationHostNetwork = "podsapi.io/find-host-network"
	AnnotationRuntimeOnly = "podsapi.io/find-runtime-only"
)

// runtimeOnly reports whether m is a pod only the container runtime told
// of.
func runtimeOnly(m client.Match) bool {
	return m.Source == podsv1alpha1.MatchSource_MATCH_SOURCE_RUNTIME
}

// annotated returns the pod of m with the annotations of what else m says.
func annotated(m client.Match) *corev1.Pod {
	if m.Container == "" && !m.Deleted && !m.HostNetwork && !runtimeOnly(m) && m.Workload == nil {
		return m.Pod
	}
	pod := m.Pod.DeepCopy()
	if pod.Annotations == nil {
		pod.Annotations = make(map[string]string)
	}
	if m.Container != "" {
		pod.Annotations[AnnotationContainer] = m.Container
	}
	if m.Deleted {
		pod.Annotations[AnnotationDeleted] = "true"
	}
	if m.HostNetwork {
		pod.Annotations[AnnotationHostNetwork] = "true"
	}
	if runtimeOnly(m) {
		pod.Annotations[AnnotationRuntimeOnly] = "true"
	}
	if m.Workload != nil {
		pod.Annotations[AnnotationWorkload] = WorkloadString(m.Workload)
	}
	return pod
}
