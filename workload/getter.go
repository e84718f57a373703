package workload

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// Object is an object a Getter answers: its metadata (a
// *metav1.PartialObjectMetadata), or the object whole (a *appsv1.ReplicaSet,
// a *corev1.Namespace, ...).
type Object interface {
	metav1.Object
	runtime.Object
}

// Getter gets one object from the API server: a namespaced one, or a
// namespace (resource v1 namespaces, namespace ""). NewGetter's asks for a
// PartialObjectMetadata only, NewObjectGetter's for the whole object. A
// missing object is an error apierrors.IsNotFound reports.
type Getter interface {
	Get(ctx context.Context, resource schema.GroupVersionResource, namespace, name string) (Object, error)
}

// metadataGetter is a Getter on client-go's metadata client, which asks for
// `application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`
// (JSON as a fallback): the API server sends the object's metadata only.
type metadataGetter struct{ c metadata.Interface }

// NewGetter returns a Getter of metadata asking the API server cfg reaches.
// cfg is copied; its rate limit, timeouts and transport wrappers apply.
func NewGetter(cfg *rest.Config) (Getter, error) {
	c, err := metadata.NewForConfig(metadata.ConfigFor(cfg))
	if err != nil {
		return nil, fmt.Errorf("workload: metadata client: %w", err)
	}
	return metadataGetter{c: c}, nil
}

func (g metadataGetter) Get(ctx context.Context, resource schema.GroupVersionResource, namespace, name string) (Object, error) {
	if resource.Resource == namespaces.Resource && resource.Group == "" {
		return g.c.Resource(resource).Get(ctx, name, metav1.GetOptions{})
	}
	return g.c.Resource(resource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

// objectGetter is a Getter of whole objects: client-go's REST clients of
// apps/v1, batch/v1 and v1, configured as its typed clients configure
// theirs (protobuf, JSON as a fallback), over a scheme of these three group
// versions only. The typed clientset would link the scheme of every API
// group into podsapi-server (test/archtest's TestServerWeight).
type objectGetter struct {
	clients map[schema.GroupVersion]rest.Interface
}

// NewObjectGetter returns a Getter of whole objects (the kinds of the node's
// slice: ReplicaSets, Deployments, StatefulSets, DaemonSets, Jobs, CronJobs
// and Namespaces) asking the API server cfg reaches, decoded into their
// typed structs as client-go's typed clients decode them (no TypeMeta). cfg
// is copied; its rate limit, timeouts and transport wrappers apply.
func NewObjectGetter(cfg *rest.Config) (Getter, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{appsv1.AddToScheme, batchv1.AddToScheme, corev1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("workload: scheme: %w", err)
		}
	}
	base := rest.CopyConfig(cfg)
	base.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(scheme, serializer.NewCodecFactory(scheme)).WithoutConversion()
	base.ContentType = runtime.ContentTypeProtobuf
	base.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	if base.UserAgent == "" {
		base.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	httpClient, err := rest.HTTPClientFor(base)
	if err != nil {
		return nil, fmt.Errorf("workload: object client: %w", err)
	}
	g := objectGetter{clients: map[schema.GroupVersion]rest.Interface{}}
	for _, gv := range []schema.GroupVersion{appsv1.SchemeGroupVersion, batchv1.SchemeGroupVersion, corev1.SchemeGroupVersion} {
		c := rest.CopyConfig(base)
		c.GroupVersion = &gv
		c.APIPath = "/apis"
		if gv.Group == "" {
			c.APIPath = "/api"
		}
		if g.clients[gv], err = rest.RESTClientForConfigAndClient(c, httpClient); err != nil {
			return nil, fmt.Errorf("workload: client of %s: %w", gv, err)
		}
	}
	return g, nil
}

func (g objectGetter) Get(ctx context.Context, resource schema.GroupVersionResource, namespace, name string) (Object, error) {
	c, ok := g.clients[resource.GroupVersion()]
	if !ok {
		return nil, fmt.Errorf("workload: no client of %s", resource.GroupVersion())
	}
	raw, err := c.Get().NamespaceIfScoped(namespace, namespace != "").Resource(resource.Resource).Name(name).Do(ctx).Get()
	if err != nil {
		return nil, err
	}
	obj, ok := raw.(Object)
	if !ok {
		return nil, fmt.Errorf("workload: the API server answered a %T for %s %s/%s", raw, resource.Resource, namespace, name)
	}
	return obj, nil
}
