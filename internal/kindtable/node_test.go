package kindtable

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNodeCells pins the node table's cells as the API server's printNode
// computes them.
func TestNodeCells(t *testing.T) {
	now := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	ready := func(s corev1.ConditionStatus) corev1.NodeCondition {
		return corev1.NodeCondition{Type: corev1.NodeReady, Status: s}
	}
	for _, tc := range []struct {
		name string
		node corev1.Node
		want []any
	}{
		{"empty", corev1.Node{}, []any{"", "Unknown", "<none>", "<unknown>", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"}},
		{"ready worker", corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n", CreationTimestamp: metav1.NewTime(now.Add(-2 * time.Hour)),
				Labels: map[string]string{"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/gpu": "", "kubernetes.io/role": "worker"}},
			Spec: corev1.NodeSpec{Unschedulable: true},
			Status: corev1.NodeStatus{
				Conditions: []corev1.NodeCondition{ready(corev1.ConditionFalse), {Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue}, ready(corev1.ConditionTrue)},
				Addresses:  []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "n"}, {Type: corev1.NodeExternalIP, Address: "1.2.3.4"}, {Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeInternalIP, Address: "10.0.0.2"}},
				NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", OSImage: "Debian", KernelVersion: "6.1", Architecture: "arm64", ContainerRuntimeVersion: "containerd://2.1"},
			},
		}, []any{"n", "Ready,SchedulingDisabled", "gpu,worker", "120m", "v1.37.2", "10.0.0.1", "1.2.3.4", "Debian", "6.1 (arm64)", "containerd://2.1"}},
		{"not ready", corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready(corev1.ConditionUnknown)}}},
			[]any{"", "NotReady", "<none>", "<unknown>", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NodeRowOf(&tc.node).Cells(now); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("cells %q, want %q", got, tc.want)
			}
		})
	}
	if n := len(NodeColumns()); n != 10 {
		t.Errorf("%d columns, want 10", n)
	}
}
