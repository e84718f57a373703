package workload

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// Getter gets the metadata of one namespaced object from the API server.
// NewGetter's asks for a PartialObjectMetadata only.
type Getter interface {
	Get(ctx context.Context, resource schema.GroupVersionResource, namespace, name string) (*metav1.PartialObjectMetadata, error)
}

// The resources a Resolver gets.
var (
	replicaSets = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
	jobs        = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
)

// metadataGetter is a Getter on client-go's metadata client, which asks for
// `application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`
// (JSON as a fallback): the API server sends the object's metadata only.
type metadataGetter struct{ c metadata.Interface }

// NewGetter returns a Getter asking the API server cfg reaches. cfg is
// copied; its rate limit, timeouts and transport wrappers apply.
func NewGetter(cfg *rest.Config) (Getter, error) {
	c, err := metadata.NewForConfig(metadata.ConfigFor(cfg))
	if err != nil {
		return nil, fmt.Errorf("workload: metadata client: %w", err)
	}
	return metadataGetter{c: c}, nil
}

func (g metadataGetter) Get(ctx context.Context, resource schema.GroupVersionResource, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	return g.c.Resource(resource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}
