package door

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/podsapi/podsapi/budget"
	"github.com/podsapi/podsapi/internal/loglimit"
	"github.com/podsapi/podsapi/kindstore"
	"github.com/podsapi/podsapi/kubeapi"
	"github.com/podsapi/podsapi/store"
)

// Kinds are the namespaces and the node that the door answers itself
// (Settings.Kinds): each held in a kindstore fed by one shared informer of
// the API server, with podsapi's own credentials, whatever the number of
// agents that read them through the door.
type Kinds struct {
	Namespaces *kindstore.Namespaces
	Node       *kindstore.Nodes

	client rest.Interface
	params runtime.ParameterCodec
	node   string
	logger *slog.Logger
	// warnings limits the warnings of failed lists and watches to one per
	// resource every minute.
	warnings *loglimit.Limiter[string]
}

// The bounds of each kind's store: the changes kept for watches that
// resume (namespaces and a node change rarely: a thousand changes is hours
// of a busy cluster's namespaces), and the budget of the encodings kept for
// the agents (a namespace's few encodings are a few KB).
const (
	kindHistory      = 1000
	kindHistoryBytes = 16 << 20
	kindViewBytes    = 32 << 20
)

// newKinds returns the kinds of node, read from the API server of cfg
// (podsapi's own configuration), not yet started (Run).
func newKinds(cfg *rest.Config, node string, logger *slog.Logger) (*Kinds, error) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c := rest.CopyConfig(cfg)
	c.APIPath = "/api"
	c.GroupVersion = &corev1.SchemeGroupVersion
	c.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(scheme, serializer.NewCodecFactory(scheme)).WithoutConversion()
	// Protobuf is what the API server encodes fastest and the smallest.
	c.ContentType = "application/vnd.kubernetes.protobuf"
	c.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	client, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("the client of namespaces and nodes: %w", err)
	}
	bounds := func() kindstore.Option {
		return kindstore.WithStoreOptions(store.WithHistory(kindHistory, kindHistoryBytes), store.WithBudget(budget.New(kindViewBytes)))
	}
	return &Kinds{
		Namespaces: kindstore.NewNamespaces(bounds()),
		Node:       kindstore.NewNodes(bounds()),
		client:     client, params: runtime.NewParameterCodec(scheme), node: node, logger: logger,
		warnings: loglimit.New[string](time.Minute),
	}, nil
}

// options are the kubeapi options that serve the kinds.
func (k *Kinds) options() []kubeapi.Option {
	return []kubeapi.Option{kubeapi.WithNamespaces(k.Namespaces), kubeapi.WithNode(k.Node)}
}

// collectors are the kinds' metrics: how old what the door answers of each
// may be.
func (k *Kinds) collectors() []prometheus.Collector {
	age := func(resource string, s interface{ Age(time.Time) time.Duration }) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "podsapi_kube_api_kind_age_seconds",
			Help:        "How old the objects of a kind that podsapi's Kubernetes API answers itself (--kube-api-shared-kinds) may be, by resource: 0 while its watch of the API server is open, else the seconds since the API server last answered it (an outage: podsapi keeps answering what it holds).",
			ConstLabels: prometheus.Labels{"resource": resource},
		}, func() float64 { return s.Age(time.Now()).Seconds() })
	}
	return []prometheus.Collector{age("namespaces", k.Namespaces), age("nodes", k.Node)}
}

// Run lists and watches the namespaces and the node, each with one
// informer, until ctx is done; each store is marked synced once its
// informer has listed. client-go's own logs are dropped: a failed list or
// watch is logged here, at most once a minute per resource.
func (k *Kinds) Run(ctx context.Context) {
	ctx = klog.NewContext(ctx, logr.Discard())
	done := make(chan struct{}, 2)
	go func() {
		defer func() { done <- struct{}{} }()
		k.runInformer(ctx, "namespaces", k.Namespaces, k.Namespaces.Heard(k.listWatch("namespaces", "")), &corev1.Namespace{})
	}()
	go func() {
		defer func() { done <- struct{}{} }()
		k.runInformer(ctx, "nodes", k.Node, k.Node.Heard(k.listWatch("nodes", fields.OneTermEqualSelector("metadata.name", k.node).String())), &corev1.Node{})
	}()
	<-done
	<-done
}

// feed is a kindstore as an informer feeds it.
type feed interface {
	cache.ResourceEventHandler
	MarkSynced()
}

// runInformer runs an informer of lw feeding st until ctx is done, and
// marks st synced once the informer has delivered its first list.
func (k *Kinds) runInformer(ctx context.Context, resource string, st feed, lw *cache.ListWatch, obj runtime.Object) {
	inf := cache.NewSharedIndexInformer(lw, obj, 0, cache.Indexers{})
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || errors.Is(err, io.EOF) {
			return // The ordinary ends of a watch, which the informer resumes.
		}
		if ok, suppressed := k.warnings.Allow(resource); ok {
			k.logger.Warn("Kubernetes API: podsapi's watch of "+resource+" failed; the door answers what it holds until it is back (RBAC: deploy/components/kube-api-kinds)",
				"error", err, "suppressed", suppressed)
		}
	})
	// Managed fields are most of an object's bytes and no agent reads
	// them; the store drops them too, and this keeps them out of the
	// informer's own cache.
	_ = inf.SetTransform(stripManagedFields)
	reg, err := inf.AddEventHandler(st)
	if err != nil {
		// The store never syncs, and every request of the kind is passed
		// to the API server: said, as the watch's failures are.
		k.logger.Error("Kubernetes API: podsapi cannot follow its watch of "+resource+"; its requests are passed to the API server", "error", err)
		return
	}
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
			st.MarkSynced()
		}
	}()
	inf.RunWithContext(ctx)
}

// stripManagedFields is the informers' transform: it drops an object's
// managed fields.
func stripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// listWatch lists and watches resource, with the field selector sel.
func (k *Kinds) listWatch(resource, sel string) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = sel
			var list runtime.Object = &corev1.NamespaceList{}
			if resource == "nodes" {
				list = &corev1.NodeList{}
			}
			ctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			err := k.client.Get().Resource(resource).VersionedParams(&opts, k.params).Do(ctx).Into(list)
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = sel
			opts.Watch = true
			req := k.client.Get().Resource(resource).VersionedParams(&opts, k.params)
			if opts.TimeoutSeconds != nil {
				req = req.Timeout(time.Duration(*opts.TimeoutSeconds) * time.Second)
			}
			return req.Watch(ctx)
		},
	}
}
