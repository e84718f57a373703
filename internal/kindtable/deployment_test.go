package kindtable

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestDeploymentCells pins the Deployment table's cells as the API
// server's printDeployment computes them.
func TestDeploymentCells(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    appsv1.Deployment
		want []any
	}{
		// No selector converts to labels.Nothing, printed as "".
		{"empty", appsv1.Deployment{}, []any{"", "0/0", int64(0), int64(0), "<unknown>", "", "", ""}},
		{"rolling", appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web", CreationTimestamp: ago(3 * 24 * time.Hour)},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](4), Selector: webSelector, Template: twoContainers},
			Status:     appsv1.DeploymentStatus{ReadyReplicas: 3, UpdatedReplicas: 2, AvailableReplicas: 3},
		}, []any{"web", "3/4", int64(2), int64(3), "3d", "app,sidecar", "app:1,proxy:2", "app=web,tier in (front)"}},
		{"invalid selector", appsv1.Deployment{Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}},
		}}}, []any{"", "0/0", int64(0), int64(0), "<unknown>", "", "", "<invalid>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DeploymentRowOf(&tc.d).Cells(now); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("cells %#v, want %#v", got, tc.want)
			}
		})
	}
	if got := columnNames(DeploymentColumns()); !reflect.DeepEqual(got, []string{"Name", "Ready", "Up-to-date", "Available", "Age", "Containers", "Images", "Selector"}) {
		t.Errorf("columns %v", got)
	}
}
