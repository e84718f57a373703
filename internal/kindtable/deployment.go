package kindtable

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/internal/podtable"
)

// DeploymentColumns returns the API server's column definitions of the
// Deployment table (printDeployment), every priority included.
func DeploymentColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Ready", Type: "string", Description: "Number of the pod with ready state"},
		{Name: "Up-to-date", Type: "string", Description: appsv1.DeploymentStatus{}.SwaggerDoc()["updatedReplicas"]},
		{Name: "Available", Type: "string", Description: appsv1.DeploymentStatus{}.SwaggerDoc()["availableReplicas"]},
		ageColumn, containersColumn, imagesColumn,
		selectorColumn(appsv1.DeploymentSpec{}.SwaggerDoc()["selector"]),
	}
}

// DeploymentRow is what the Deployment table shows of a Deployment, apart
// from the time at which it is shown.
type DeploymentRow struct {
	Name, Ready         string
	UpToDate, Available int64
	Created             time.Time
	template
	Selector string
}

// DeploymentRowOf computes the row of d as the API server's
// printDeployment does (wide, as the API server prints every column): its
// selector "<invalid>" when it does not convert, and "" when it has none.
func DeploymentRowOf(d *appsv1.Deployment) DeploymentRow {
	selector := "<invalid>"
	if sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil {
		selector = sel.String()
	}
	return DeploymentRow{
		Name: d.Name, Ready: fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, deref(d.Spec.Replicas)),
		UpToDate: int64(d.Status.UpdatedReplicas), Available: int64(d.Status.AvailableReplicas),
		Created: d.CreationTimestamp.Time, template: templateOf(d.Spec.Template.Spec.Containers), Selector: selector,
	}
}

// Cells returns the row's cells at time now, one for each of
// DeploymentColumns.
func (r DeploymentRow) Cells(now time.Time) []any {
	return []any{r.Name, r.Ready, r.UpToDate, r.Available, podtable.Since(r.Created, now), r.Containers, r.Images, r.Selector}
}

// Conditions returns none: the API server marks no Deployment row.
func (DeploymentRow) Conditions() []metav1.TableRowCondition { return nil }
