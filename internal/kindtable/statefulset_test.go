package kindtable

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestStatefulSetCells pins the StatefulSet table's cells as the API
// server's printStatefulSet computes them.
func TestStatefulSetCells(t *testing.T) {
	for _, tc := range []struct {
		name string
		ss   appsv1.StatefulSet
		want []any
	}{
		{"empty", appsv1.StatefulSet{}, []any{"", "0/0", "<unknown>", "", ""}},
		{"ready", appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "db", CreationTimestamp: ago(45 * time.Second)},
			Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3), Template: twoContainers},
			Status:     appsv1.StatefulSetStatus{ReadyReplicas: 3, Replicas: 3},
		}, []any{"db", "3/3", "45s", "app,sidecar", "app:1,proxy:2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := StatefulSetRowOf(&tc.ss).Cells(now); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("cells %#v, want %#v", got, tc.want)
			}
		})
	}
	if got := columnNames(StatefulSetColumns()); !reflect.DeepEqual(got, []string{"Name", "Ready", "Age", "Containers", "Images"}) {
		t.Errorf("columns %v", got)
	}
}
