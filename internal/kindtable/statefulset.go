package kindtable

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/internal/podtable"
)

// StatefulSetColumns returns the API server's column definitions of the
// StatefulSet table (printStatefulSet), every priority included.
func StatefulSetColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Ready", Type: "string", Description: "Number of the pod with ready state"},
		ageColumn, containersColumn, imagesColumn,
	}
}

// StatefulSetRow is what the StatefulSet table shows of a StatefulSet,
// apart from the time at which it is shown.
type StatefulSetRow struct {
	Name, Ready string
	Created     time.Time
	template
}

// StatefulSetRowOf computes the row of ss as the API server's
// printStatefulSet does (wide, as the API server prints every column).
func StatefulSetRowOf(ss *appsv1.StatefulSet) StatefulSetRow {
	return StatefulSetRow{
		Name: ss.Name, Ready: fmt.Sprintf("%d/%d", ss.Status.ReadyReplicas, deref(ss.Spec.Replicas)),
		Created: ss.CreationTimestamp.Time, template: templateOf(ss.Spec.Template.Spec.Containers),
	}
}

// Cells returns the row's cells at time now, one for each of
// StatefulSetColumns.
func (r StatefulSetRow) Cells(now time.Time) []any {
	return []any{r.Name, r.Ready, podtable.Since(r.Created, now), r.Containers, r.Images}
}

// Conditions returns none: the API server marks no StatefulSet row.
func (StatefulSetRow) Conditions() []metav1.TableRowCondition { return nil }
