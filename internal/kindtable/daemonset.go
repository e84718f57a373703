package kindtable

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/podsapi/podsapi/internal/podtable"
)

// DaemonSetColumns returns the API server's column definitions of the
// DaemonSet table (printDaemonSet), every priority included.
func DaemonSetColumns() []metav1.TableColumnDefinition {
	status := appsv1.DaemonSetStatus{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Desired", Type: "integer", Description: status["desiredNumberScheduled"]},
		{Name: "Current", Type: "integer", Description: status["currentNumberScheduled"]},
		{Name: "Ready", Type: "integer", Description: status["numberReady"]},
		{Name: "Up-to-date", Type: "integer", Description: status["updatedNumberScheduled"]},
		{Name: "Available", Type: "integer", Description: status["numberAvailable"]},
		{Name: "Node Selector", Type: "string", Description: corev1.PodSpec{}.SwaggerDoc()["nodeSelector"]},
		ageColumn, containersColumn, imagesColumn,
		selectorColumn(appsv1.DaemonSetSpec{}.SwaggerDoc()["selector"]),
	}
}

// DaemonSetRow is what the DaemonSet table shows of a DaemonSet, apart
// from the time at which it is shown.
type DaemonSetRow struct {
	Name                                         string
	Desired, Current, Ready, UpToDate, Available int64
	NodeSelector                                 string
	Created                                      time.Time
	template
	Selector string
}

// DaemonSetRowOf computes the row of ds as the API server's
// printDaemonSet does (wide, as the API server prints every column).
func DaemonSetRowOf(ds *appsv1.DaemonSet) DaemonSetRow {
	st := ds.Status
	return DaemonSetRow{
		Name: ds.Name, Desired: int64(st.DesiredNumberScheduled), Current: int64(st.CurrentNumberScheduled),
		Ready: int64(st.NumberReady), UpToDate: int64(st.UpdatedNumberScheduled), Available: int64(st.NumberAvailable),
		NodeSelector: labels.FormatLabels(ds.Spec.Template.Spec.NodeSelector), Created: ds.CreationTimestamp.Time,
		template: templateOf(ds.Spec.Template.Spec.Containers), Selector: metav1.FormatLabelSelector(ds.Spec.Selector),
	}
}

// Cells returns the row's cells at time now, one for each of
// DaemonSetColumns.
func (r DaemonSetRow) Cells(now time.Time) []any {
	return []any{r.Name, r.Desired, r.Current, r.Ready, r.UpToDate, r.Available, r.NodeSelector,
		podtable.Since(r.Created, now), r.Containers, r.Images, r.Selector}
}

// Conditions returns none: the API server marks no DaemonSet row.
func (DaemonSetRow) Conditions() []metav1.TableRowCondition { return nil }
