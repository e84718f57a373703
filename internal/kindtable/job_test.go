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

// TestJobCells pins the Job table's cells as the API server's printJob
// computes them: the status by the first of its conditions, the
// completions by spec.completions or parallelism, the duration from the
// start to the completion or to now.
func TestJobCells(t *testing.T) {
	cond := func(t batchv1.JobConditionType, s corev1.ConditionStatus) batchv1.JobCondition {
		return batchv1.JobCondition{Type: t, Status: s}
	}
	deleted := ago(time.Second)
	for _, tc := range []struct {
		name string
		job  batchv1.Job
		want []any
	}{
		{"empty", batchv1.Job{}, []any{"", "Running", "0/1", "", "<unknown>", "", "", "<none>"}},
		{"complete", batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "backup", CreationTimestamp: ago(2 * time.Hour)},
			Spec:       batchv1.JobSpec{Completions: ptr.To[int32](3), Selector: webSelector, Template: twoContainers},
			Status: batchv1.JobStatus{Succeeded: 3, StartTime: ptr.To(ago(2 * time.Hour)), CompletionTime: ptr.To(ago(time.Hour + 55*time.Minute)),
				Conditions: []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue), cond(batchv1.JobComplete, corev1.ConditionTrue)}},
		}, []any{"backup", "Complete", "3/3", "5m", "120m", "app,sidecar", "app:1,proxy:2", "app=web,tier in (front)"}},
		{"running in parallel", batchv1.Job{
			Spec:   batchv1.JobSpec{Parallelism: ptr.To[int32](4)},
			Status: batchv1.JobStatus{Succeeded: 1, StartTime: ptr.To(ago(90 * time.Second))},
		}, []any{"", "Running", "1/1 of 4", "90s", "<unknown>", "", "", "<none>"}},
		{"failed", batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{cond(batchv1.JobFailed, corev1.ConditionTrue)}}},
			[]any{"", "Failed", "0/1", "", "<unknown>", "", "", "<none>"}},
		{"terminating", batchv1.Job{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &deleted},
			Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{cond(batchv1.JobSuspended, corev1.ConditionTrue)}}},
			[]any{"", "Terminating", "0/1", "", "<unknown>", "", "", "<none>"}},
		{"suspended", batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{cond(batchv1.JobSuspended, corev1.ConditionTrue)}}},
			[]any{"", "Suspended", "0/1", "", "<unknown>", "", "", "<none>"}},
		{"failure target", batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{cond(batchv1.JobFailureTarget, corev1.ConditionTrue)}}},
			[]any{"", "FailureTarget", "0/1", "", "<unknown>", "", "", "<none>"}},
		{"success criteria met", batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue)}}},
			[]any{"", "SuccessCriteriaMet", "0/1", "", "<unknown>", "", "", "<none>"}},
		// The first condition of a type counts: a false Complete before a
		// true one is not complete.
		{"first condition counts", batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{
			cond(batchv1.JobComplete, corev1.ConditionFalse), cond(batchv1.JobComplete, corev1.ConditionTrue)}}},
			[]any{"", "Running", "0/1", "", "<unknown>", "", "", "<none>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := JobRowOf(&tc.job).Cells(now); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("cells %#v, want %#v", got, tc.want)
			}
		})
	}
	if got := columnNames(JobColumns()); !reflect.DeepEqual(got, []string{"Name", "Status", "Completions", "Duration", "Age", "Containers", "Images", "Selector"}) {
		t.Errorf("columns %v", got)
	}
}
