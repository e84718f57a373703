package kindtable

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/internal/podtable"
)

// NodeColumns returns the API server's column definitions of the node
// table, every priority included.
func NodeColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "Status", Type: "string", Description: "The status of the node"},
		{Name: "Roles", Type: "string", Description: "The roles of the node"},
		{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
		{Name: "Version", Type: "string", Description: corev1.NodeSystemInfo{}.SwaggerDoc()["kubeletVersion"]},
		{Name: "Internal-IP", Type: "string", Priority: 1, Description: corev1.NodeStatus{}.SwaggerDoc()["addresses"]},
		{Name: "External-IP", Type: "string", Priority: 1, Description: corev1.NodeStatus{}.SwaggerDoc()["addresses"]},
		{Name: "OS-Image", Type: "string", Priority: 1, Description: corev1.NodeSystemInfo{}.SwaggerDoc()["osImage"]},
		{Name: "Kernel-Version", Type: "string", Priority: 1, Description: corev1.NodeSystemInfo{}.SwaggerDoc()["kernelVersion"]},
		{Name: "Container-Runtime", Type: "string", Priority: 1, Description: corev1.NodeSystemInfo{}.SwaggerDoc()["containerRuntimeVersion"]},
	}
}

// NodeRow is what the node table shows of a node, apart from the time at
// which it is shown.
type NodeRow struct {
	Name, Status, Roles, Version                              string
	Created                                                   time.Time
	InternalIP, ExternalIP, OSImage, Kernel, ContainerRuntime string
}

// The labels a node's roles are read from, as printNode reads them.
const (
	roleLabelPrefix = "node-role.kubernetes.io/"
	roleLabel       = "kubernetes.io/role"
)

// NodeRowOf computes the row of node as the API server's printNode does
// (wide, as the API server prints every column).
func NodeRowOf(node *corev1.Node) NodeRow {
	var status []string
	for _, c := range node.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		// The last Ready condition counts, as printNode's map keeps it.
		status = status[:0]
		if c.Status == corev1.ConditionTrue {
			status = append(status, string(c.Type))
		} else {
			status = append(status, "Not"+string(c.Type))
		}
	}
	if len(status) == 0 {
		status = append(status, "Unknown")
	}
	if node.Spec.Unschedulable {
		status = append(status, "SchedulingDisabled")
	}
	info := node.Status.NodeInfo
	kernel := unknown(info.KernelVersion)
	if info.Architecture != "" {
		kernel += " (" + info.Architecture + ")"
	}
	return NodeRow{
		Name: node.Name, Status: strings.Join(status, ","), Roles: none(strings.Join(nodeRoles(node), ",")),
		Version: info.KubeletVersion, Created: node.CreationTimestamp.Time,
		InternalIP: address(node, corev1.NodeInternalIP), ExternalIP: address(node, corev1.NodeExternalIP),
		OSImage: unknown(info.OSImage), Kernel: kernel, ContainerRuntime: unknown(info.ContainerRuntimeVersion),
	}
}

// Cells returns the row's cells at time now, one for each of NodeColumns.
func (r NodeRow) Cells(now time.Time) []any {
	return []any{r.Name, r.Status, r.Roles, podtable.Since(r.Created, now), r.Version,
		r.InternalIP, r.ExternalIP, r.OSImage, r.Kernel, r.ContainerRuntime}
}

// Conditions returns none: the API server marks no node row.
func (NodeRow) Conditions() []metav1.TableRowCondition { return nil }

// nodeRoles returns the sorted roles of node: the <role> of its labels
// node-role.kubernetes.io/<role>, and the value of kubernetes.io/role.
func nodeRoles(node *corev1.Node) []string {
	var roles []string
	for k, v := range node.Labels {
		switch {
		case strings.HasPrefix(k, roleLabelPrefix):
			if role := strings.TrimPrefix(k, roleLabelPrefix); role != "" {
				roles = append(roles, role)
			}
		case k == roleLabel && v != "":
			roles = append(roles, v)
		}
	}
	slices.Sort(roles)
	return slices.Compact(roles)
}

// address returns the first address of node of type t, or "<none>".
func address(node *corev1.Node, t corev1.NodeAddressType) string {
	for _, a := range node.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return "<none>"
}

func none(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func unknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}
