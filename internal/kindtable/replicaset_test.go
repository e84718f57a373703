package kindtable

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// now is the time the tests' tables are shown at.
var now = time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)

// ago returns the time d before now.
func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

// twoContainers is a pod template of two containers.
var twoContainers = corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
	{Name: "app", Image: "app:1"}, {Name: "sidecar", Image: "proxy:2"},
}}}

// webSelector selects app=web and tier in (front).
var webSelector = &metav1.LabelSelector{
	MatchLabels:      map[string]string{"app": "web"},
	MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"front"}}},
}

// columnNames returns the names of cols.
func columnNames(cols []metav1.TableColumnDefinition) []string {
	var names []string
	for _, c := range cols {
		names = append(names, c.Name)
	}
	return names
}

// TestReplicaSetCells pins the ReplicaSet table's cells as the API
// server's printReplicaSet computes them.
func TestReplicaSetCells(t *testing.T) {
	for _, tc := range []struct {
		name string
		rs   appsv1.ReplicaSet
		want []any
	}{
		{"empty", appsv1.ReplicaSet{}, []any{"", int64(0), int64(0), int64(0), "<unknown>", "", "", "<none>"}},
		{"scaled", appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: "web-5d4f", CreationTimestamp: ago(90 * time.Minute)},
			Spec:       appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3), Selector: webSelector, Template: twoContainers},
			Status:     appsv1.ReplicaSetStatus{Replicas: 2, ReadyReplicas: 1},
		}, []any{"web-5d4f", int64(3), int64(2), int64(1), "90m", "app,sidecar", "app:1,proxy:2", "app=web,tier in (front)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReplicaSetRowOf(&tc.rs).Cells(now); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("cells %#v, want %#v", got, tc.want)
			}
		})
	}
	if got := columnNames(ReplicaSetColumns()); !reflect.DeepEqual(got, []string{"Name", "Desired", "Current", "Ready", "Age", "Containers", "Images", "Selector"}) {
		t.Errorf("columns %v", got)
	}
}
