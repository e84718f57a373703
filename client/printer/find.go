package printer

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/client"
)

// PrintMatches prints the pods FindPods found: the table of PrintList with
// a CONTAINER column after NAME ("<none>" when the key named no container)
// and "(deleted)" after the STATUS of a deleted pod; for JSON and YAML a
// Kubernetes List of the pods, each with the podsapi.io/find-container,
// podsapi.io/find-deleted and podsapi.io/find-host-network annotations
// when they apply; for Name, one pod/NAME per line.
func (p *Printer) PrintMatches(ms []client.Match) error {
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
		rows := [][]string{append(h[:2:2], append([]string{"CONTAINER"}, h[2:]...)...)}
		for _, m := range ms {
			r := p.row(m.Pod)
			container := m.Container
			if container == "" {
				container = "<none>"
			}
			if m.Deleted {
				r[3] += " (deleted)"
			}
			rows = append(rows, append(r[:2:2], append([]string{container}, r[2:]...)...))
		}
		return p.write(p.table.format(rows...))
	}
}

// The annotations PrintMatches adds to the pods it prints as objects.
const (
	AnnotationContainer   = "podsapi.io/find-container"
	AnnotationDeleted     = "podsapi.io/find-deleted"
	AnnotationHostNetwork = "podsapi.io/find-host-network"
)

// annotated returns the pod of m with the annotations of what else m says.
func annotated(m client.Match) *corev1.Pod {
	if m.Container == "" && !m.Deleted && !m.HostNetwork {
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
	return pod
}
