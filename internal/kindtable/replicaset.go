package kindtable

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/internal/podtable"
)

// ReplicaSetColumns returns the API server's column definitions of the
// ReplicaSet table (printReplicaSet), every priority included.
func ReplicaSetColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Desired", Type: "integer", Description: appsv1.ReplicaSetSpec{}.SwaggerDoc()["replicas"]},
		{Name: "Current", Type: "integer", Description: appsv1.ReplicaSetStatus{}.SwaggerDoc()["replicas"]},
		{Name: "Ready", Type: "integer", Description: appsv1.ReplicaSetStatus{}.SwaggerDoc()["readyReplicas"]},
		ageColumn, containersColumn, imagesColumn,
		selectorColumn(appsv1.ReplicaSetSpec{}.SwaggerDoc()["selector"]),
	}
}

// ReplicaSetRow is what the ReplicaSet table shows of a ReplicaSet, apart
// from the time at which it is shown.
type ReplicaSetRow struct {
	Name                    string
	Desired, Current, Ready int64
	Created                 time.Time
	template
	Selector string
}

// ReplicaSetRowOf computes the row of rs as the API server's
// printReplicaSet does (wide, as the API server prints every column).
func ReplicaSetRowOf(rs *appsv1.ReplicaSet) ReplicaSetRow {
	return ReplicaSetRow{
		Name: rs.Name, Desired: deref(rs.Spec.Replicas), Current: int64(rs.Status.Replicas), Ready: int64(rs.Status.ReadyReplicas),
		Created: rs.CreationTimestamp.Time, template: templateOf(rs.Spec.Template.Spec.Containers),
		Selector: metav1.FormatLabelSelector(rs.Spec.Selector),
	}
}

// Cells returns the row's cells at time now, one for each of
// ReplicaSetColumns.
func (r ReplicaSetRow) Cells(now time.Time) []any {
	return []any{r.Name, r.Desired, r.Current, r.Ready, podtable.Since(r.Created, now), r.Containers, r.Images, r.Selector}
}

// Conditions returns none: the API server marks no ReplicaSet row.
func (ReplicaSetRow) Conditions() []metav1.TableRowCondition { return nil }
