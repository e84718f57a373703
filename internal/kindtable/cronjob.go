package kindtable

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/internal/podtable"
)

// CronJobColumns returns the API server's column definitions of the
// CronJob table (printCronJob), every priority included.
func CronJobColumns() []metav1.TableColumnDefinition {
	spec := batchv1.CronJobSpec{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Schedule", Type: "string", Description: spec["schedule"]},
		{Name: "Timezone", Type: "string", Description: spec["timeZone"]},
		{Name: "Suspend", Type: "boolean", Description: spec["suspend"]},
		{Name: "Active", Type: "integer", Description: batchv1.CronJobStatus{}.SwaggerDoc()["active"]},
		{Name: "Last Schedule", Type: "string", Description: batchv1.CronJobStatus{}.SwaggerDoc()["lastScheduleTime"]},
		ageColumn, containersColumn, imagesColumn,
		selectorColumn(batchv1.JobSpec{}.SwaggerDoc()["selector"]),
	}
}

// CronJobRow is what the CronJob table shows of a CronJob, apart from the
// time at which it is shown.
type CronJobRow struct {
	Name, Schedule, TimeZone, Suspend string
	Active                            int64
	// LastSchedule is when it last scheduled a Job (nil for never).
	LastSchedule *time.Time
	Created      time.Time
	template
	Selector string
}

// CronJobRowOf computes the row of cj as the API server's printCronJob
// does (wide, as the API server prints every column).
func CronJobRowOf(cj *batchv1.CronJob) CronJobRow {
	r := CronJobRow{
		Name: cj.Name, Schedule: cj.Spec.Schedule, TimeZone: "<none>", Suspend: "<unset>", Active: int64(len(cj.Status.Active)),
		Created: cj.CreationTimestamp.Time, template: templateOf(cj.Spec.JobTemplate.Spec.Template.Spec.Containers),
		Selector: metav1.FormatLabelSelector(cj.Spec.JobTemplate.Spec.Selector),
	}
	if tz := cj.Spec.TimeZone; tz != nil {
		r.TimeZone = *tz
	}
	if s := cj.Spec.Suspend; s != nil {
		r.Suspend = "False"
		if *s {
			r.Suspend = "True"
		}
	}
	if t := cj.Status.LastScheduleTime; t != nil {
		r.LastSchedule = &t.Time
	}
	return r
}

// Cells returns the row's cells at time now, one for each of
// CronJobColumns.
func (r CronJobRow) Cells(now time.Time) []any {
	last := "<none>"
	if r.LastSchedule != nil {
		last = podtable.Since(*r.LastSchedule, now)
	}
	return []any{r.Name, r.Schedule, r.TimeZone, r.Suspend, r.Active, last, podtable.Since(r.Created, now),
		r.Containers, r.Images, r.Selector}
}

// Conditions returns none: the API server marks no CronJob row.
func (CronJobRow) Conditions() []metav1.TableRowCondition { return nil }
