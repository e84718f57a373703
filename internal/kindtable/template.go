package kindtable

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The columns that the tables of the owner kinds share, as the API
// server's printers define them.
var (
	nameColumn = metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]}
	ageColumn  = metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]}
	// containersColumn and imagesColumn are the wide columns of a pod
	// template's containers.
	containersColumn = metav1.TableColumnDefinition{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."}
	imagesColumn     = metav1.TableColumnDefinition{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."}
)

// selectorColumn is the wide column of a workload's selector, described
// by the swagger doc of its spec's selector field.
func selectorColumn(description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Selector", Type: "string", Priority: 1, Description: description}
}

// template is what a table shows of a pod template: its containers'
// names and images, each joined by commas, as the API server's
// layoutContainerCells does.
type template struct {
	Containers, Images string
}

// templateOf returns what the tables show of the containers cs.
func templateOf(cs []corev1.Container) template {
	names := make([]string, len(cs))
	images := make([]string, len(cs))
	for i, c := range cs {
		names[i], images[i] = c.Name, c.Image
	}
	return template{Containers: strings.Join(names, ","), Images: strings.Join(images, ",")}
}

// deref returns *p, or 0 for nil (a field the API server defaults).
func deref(p *int32) int64 {
	if p == nil {
		return 0
	}
	return int64(*p)
}
