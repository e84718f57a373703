package kindtable

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/podsapi/podsapi/internal/podtable"
)

// JobColumns returns the API server's column definitions of the Job table
// (printJob), every priority included.
func JobColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Status", Type: "string", Description: "Status of the job."},
		{Name: "Completions", Type: "string", Description: batchv1.JobStatus{}.SwaggerDoc()["succeeded"]},
		{Name: "Duration", Type: "string", Description: "Time required to complete the job."},
		ageColumn, containersColumn, imagesColumn,
		selectorColumn(batchv1.JobSpec{}.SwaggerDoc()["selector"]),
	}
}

// JobRow is what the Job table shows of a Job, apart from the time at
// which it is shown (its age, and the duration of a Job still running).
type JobRow struct {
	Name, Status, Completions string
	// Started and Completed are the Job's start and completion times
	// (zero when it has none).
	Started, Completed, Created time.Time
	template
	Selector string
}

// JobRowOf computes the row of job as the API server's printJob does
// (wide, as the API server prints every column).
func JobRowOf(job *batchv1.Job) JobRow {
	r := JobRow{
		Name: job.Name, Status: jobStatus(job), Completions: jobCompletions(job), Created: job.CreationTimestamp.Time,
		template: templateOf(job.Spec.Template.Spec.Containers), Selector: metav1.FormatLabelSelector(job.Spec.Selector),
	}
	if t := job.Status.StartTime; t != nil {
		r.Started = t.Time
	}
	if t := job.Status.CompletionTime; t != nil {
		r.Completed = t.Time
	}
	return r
}

// jobCompletions is the Completions cell of job: succeeded/completions,
// and, for a Job with no completions set, "of <parallelism>" when it runs
// more than one pod at once.
func jobCompletions(job *batchv1.Job) string {
	if c := job.Spec.Completions; c != nil {
		return fmt.Sprintf("%d/%d", job.Status.Succeeded, *c)
	}
	if p := deref(job.Spec.Parallelism); p > 1 {
		return fmt.Sprintf("%d/1 of %d", job.Status.Succeeded, p)
	}
	return fmt.Sprintf("%d/1", job.Status.Succeeded)
}

// jobStatus is the Status cell of job: the first of its true conditions
// Complete and Failed, Terminating while it is deleted, then Suspended,
// FailureTarget and SuccessCriteriaMet, else Running.
func jobStatus(job *batchv1.Job) string {
	conds := job.Status.Conditions
	switch {
	case jobCondition(conds, batchv1.JobComplete):
		return "Complete"
	case jobCondition(conds, batchv1.JobFailed):
		return "Failed"
	case job.DeletionTimestamp != nil:
		return "Terminating"
	case jobCondition(conds, batchv1.JobSuspended):
		return "Suspended"
	case jobCondition(conds, batchv1.JobFailureTarget):
		return "FailureTarget"
	case jobCondition(conds, batchv1.JobSuccessCriteriaMet):
		return "SuccessCriteriaMet"
	}
	return "Running"
}

// jobCondition reports whether the first condition of type t is true, as
// the API server's hasJobCondition reads them.
func jobCondition(conds []batchv1.JobCondition, t batchv1.JobConditionType) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Cells returns the row's cells at time now, one for each of JobColumns:
// the duration of a Job not yet completed is the time since it started.
func (r JobRow) Cells(now time.Time) []any {
	var d string
	switch {
	case r.Started.IsZero():
	case r.Completed.IsZero():
		d = duration.HumanDuration(now.Sub(r.Started))
	default:
		d = duration.HumanDuration(r.Completed.Sub(r.Started))
	}
	return []any{r.Name, r.Status, r.Completions, d, podtable.Since(r.Created, now), r.Containers, r.Images, r.Selector}
}

// Conditions returns none: the API server marks no Job row.
func (JobRow) Conditions() []metav1.TableRowCondition { return nil }
