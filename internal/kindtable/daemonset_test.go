package kindtable

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDaemonSetCells pins the DaemonSet table's cells as the API server's
// printDaemonSet computes them.
func TestDaemonSetCells(t *testing.T) {
	withNodeSelector := twoContainers
	withNodeSelector.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux", "disk": "ssd"}
	for _, tc := range []struct {
		name string
		ds   appsv1.DaemonSet
		want []any
	}{
		{"empty", appsv1.DaemonSet{}, []any{"", int64(0), int64(0), int64(0), int64(0), int64(0), "<none>", "<unknown>", "", "", "<none>"}},
		{"rolled out", appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: "agent", CreationTimestamp: ago(26 * time.Hour)},
			Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}, Template: withNodeSelector},
			Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 5, CurrentNumberScheduled: 4, NumberReady: 3,
				UpdatedNumberScheduled: 2, NumberAvailable: 1},
		}, []any{"agent", int64(5), int64(4), int64(3), int64(2), int64(1), "disk=ssd,kubernetes.io/os=linux", "26h", "app,sidecar", "app:1,proxy:2", "app=agent"}},
		{"one container", appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "only", Image: "only:3"}}}}}},
			[]any{"", int64(0), int64(0), int64(0), int64(0), int64(0), "<none>", "<unknown>", "only", "only:3", "<none>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DaemonSetRowOf(&tc.ds).Cells(now); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("cells %#v, want %#v", got, tc.want)
			}
		})
	}
	want := []string{"Name", "Desired", "Current", "Ready", "Up-to-date", "Available", "Node Selector", "Age", "Containers", "Images", "Selector"}
	if got := columnNames(DaemonSetColumns()); !reflect.DeepEqual(got, want) {
		t.Errorf("columns %v", got)
	}
}
