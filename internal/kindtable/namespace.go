package kindtable

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/internal/podtable"
)

// NamespaceColumns returns the API server's column definitions of the
// namespace table.
func NamespaceColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "Status", Type: "string", Description: "The status of the namespace"},
		{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	}
}

// NamespaceRow is what the namespace table shows of a namespace, apart
// from the time at which it is shown.
type NamespaceRow struct {
	Name, Status string
	Created      time.Time
}

// NamespaceRowOf computes the row of ns as the API server's
// printNamespace does.
func NamespaceRowOf(ns *corev1.Namespace) NamespaceRow {
	return NamespaceRow{Name: ns.Name, Status: string(ns.Status.Phase), Created: ns.CreationTimestamp.Time}
}

// Cells returns the row's cells at time now, one for each of
// NamespaceColumns.
func (r NamespaceRow) Cells(now time.Time) []any {
	return []any{r.Name, r.Status, podtable.Since(r.Created, now)}
}

// Conditions returns none: the API server marks no namespace row.
func (NamespaceRow) Conditions() []metav1.TableRowCondition { return nil }
