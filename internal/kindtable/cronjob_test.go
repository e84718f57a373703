package kindtable

import (
	"reflect"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestCronJobCells pins the CronJob table's cells as the API server's
// printCronJob computes them.
func TestCronJobCells(t *testing.T) {
	for _, tc := range []struct {
		name string
		cj   batchv1.CronJob
		want []any
	}{
		{"empty", batchv1.CronJob{}, []any{"", "", "<none>", "<unset>", int64(0), "<none>", "<unknown>", "", "", "<none>"}},
		{"scheduled", batchv1.CronJob{
			ObjectMeta: metav1.ObjectMeta{Name: "nightly", CreationTimestamp: ago(8 * 24 * time.Hour)},
			Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *", TimeZone: ptr.To("Europe/Paris"), Suspend: ptr.To(false),
				JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Selector: webSelector, Template: twoContainers}}},
			Status: batchv1.CronJobStatus{Active: []corev1.ObjectReference{{Name: "a"}, {Name: "b"}}, LastScheduleTime: ptr.To(ago(6 * time.Hour))},
		}, []any{"nightly", "0 3 * * *", "Europe/Paris", "False", int64(2), "6h", "8d", "app,sidecar", "app:1,proxy:2", "app=web,tier in (front)"}},
		{"suspended", batchv1.CronJob{Spec: batchv1.CronJobSpec{Suspend: ptr.To(true)}},
			[]any{"", "", "<none>", "True", int64(0), "<none>", "<unknown>", "", "", "<none>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CronJobRowOf(&tc.cj).Cells(now); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("cells %#v, want %#v", got, tc.want)
			}
		})
	}
	want := []string{"Name", "Schedule", "Timezone", "Suspend", "Active", "Last Schedule", "Age", "Containers", "Images", "Selector"}
	if got := columnNames(CronJobColumns()); !reflect.DeepEqual(got, want) {
		t.Errorf("columns %v", got)
	}
}
