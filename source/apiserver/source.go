package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/podsapi/podsapi/source/internal/sourcelog"
	"github.com/podsapi/podsapi/source/internal/sourcemetrics"
)

// listTimeout bounds one list request, so that an API server that accepts
// the connection but never answers cannot hold the Source forever.
const listTimeout = time.Minute

// emptyWatchType is the type of the watch client-go returns, without an
// error, when the connection ended before the API server answered: what a
// load balancer without an API server behind it does.
var emptyWatchType = reflect.TypeOf(watch.NewEmptyWatch())

// errEmptyWatch is the error of a watch that ended before the API server
// answered.
var errEmptyWatch = errors.New("the connection ended before the API server answered the watch")

// Source follows the pods of one node on the Kubernetes API server. Make
// one with New and start it with Run.
type Source struct {
	nodeName    string
	kubeconfig  string
	log         *slog.Logger
	warn        *sourcelog.Warner // The upstream's faults, rate-limited.
	metrics     *sourcemetrics.Metrics
	conn        *sourcemetrics.Connection
	qps         float32
	burst       int
	maxResponse int64
	dialTimeout time.Duration
	minBackoff  time.Duration
	maxBackoff  time.Duration
}

// New returns a Source of the pods whose spec.nodeName is nodeName,
// configured by opts. It registers the Source's metrics if WithRegisterer is
// given, and panics if that registerer holds a different metric of the same
// name.
func New(nodeName string, opts ...Option) *Source {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	s := &Source{
		nodeName:    nodeName,
		kubeconfig:  o.kubeconfig,
		qps:         o.qps,
		burst:       o.burst,
		maxResponse: o.maxResponse,
		dialTimeout: o.dialTimeout,
		minBackoff:  o.MinBackoff,
		maxBackoff:  o.MaxBackoff,
	}
	s.metrics, s.conn = newMetrics(o.Registerer)
	s.log = o.Logger.With("source", s.Name())
	s.warn = sourcelog.New(s.log)
	return s
}

// Name returns "apiserver:" followed by the kubeconfig path, or by
// "in-cluster" without one, to tell the Source apart in logs.
func (s *Source) Name() string {
	if s.kubeconfig == "" {
		return "apiserver:in-cluster"
	}
	return "apiserver:" + s.kubeconfig
}

// Run lists and watches the node's pods and sends them to sink, calling
// sink.MarkSynced after the first complete list, until ctx is cancelled;
// see the package documentation. It calls sink from its own goroutine only
// and assumes sink starts without any of this Source's pods.
//
// Run returns nil when ctx is cancelled, and an error only if it cannot
// start: the node name is empty, or the kubeconfig (or the in-cluster
// configuration) cannot be loaded. An API server that does not answer is
// retried forever: until the first list the sink stays unsynced,
// afterwards it keeps the last known pods.
func (s *Source) Run(ctx context.Context, sink Sink) error {
	if s.nodeName == "" {
		return errors.New("apiserver: the node name is empty")
	}
	cfg, err := s.restConfig()
	if err != nil {
		return fmt.Errorf("apiserver: %w", err)
	}
	client, err := rest.RESTClientFor(cfg)
	if err != nil {
		return fmt.Errorf("apiserver: %w", err)
	}
	st := newState(s, sink)
	lw := s.listWatch(client, st)

	// client-go's own logs go to ours, at debug level: the Source logs the
	// state of the connection itself, once per outage.
	logger := logr.FromSlogHandler(debugHandler{s.log.Handler()})
	r := cache.NewReflectorWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client), &corev1.Pod{}, st,
		cache.ReflectorOptions{
			Name:            s.Name(),
			TypeDescription: "*v1.Pod",
			Logger:          &logger,
			Backoff: &wait.Backoff{
				Duration: s.minBackoff, Cap: s.maxBackoff, Factor: 2, Jitter: 0.5, Steps: math.MaxInt32,
			},
		})
	s.log.Info("following the node's pods on the API server", "host", cfg.Host, "node", s.nodeName,
		"qps", s.qps, "burst", s.burst)
	r.RunWithContext(klog.NewContext(ctx, logger))
	return nil
}

// listWatch lists and watches the pods of the node, and tells st how each
// request went.
func (s *Source) listWatch(client rest.Interface, st *state) *cache.ListWatch {
	selector := fields.OneTermEqualSelector("spec.nodeName", s.nodeName).String()
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			ctx, cancel := context.WithTimeout(ctx, listTimeout)
			defer cancel()
			list := new(corev1.PodList)
			err := client.Get().Resource("pods").VersionedParams(&opts, schemeOnce().parameterCodec).Do(ctx).Into(list)
			st.request(ctx, reasonList, opts, err)
			if err != nil {
				return nil, err
			}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			opts.Watch = true
			req := client.Get().Resource("pods").VersionedParams(&opts, schemeOnce().parameterCodec)
			if opts.TimeoutSeconds != nil {
				req = req.Timeout(time.Duration(*opts.TimeoutSeconds) * time.Second)
			}
			w, err := req.Watch(ctx)
			if err == nil && reflect.TypeOf(w) == emptyWatchType {
				// client-go answers a connection that ended before any
				// answer with an empty watch and no error.
				st.request(ctx, reasonWatch, opts, errEmptyWatch)
			} else {
				st.request(ctx, reasonWatch, opts, err)
			}
			return w, err
		},
	}
}

// debugHandler logs every record at debug level at most.
type debugHandler struct{ slog.Handler }

func (h debugHandler) Enabled(ctx context.Context, _ slog.Level) bool {
	return h.Handler.Enabled(ctx, slog.LevelDebug)
}

func (h debugHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Level = min(r.Level, slog.LevelDebug)
	return h.Handler.Handle(ctx, r)
}

func (h debugHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return debugHandler{h.Handler.WithAttrs(attrs)}
}

func (h debugHandler) WithGroup(name string) slog.Handler {
	return debugHandler{h.Handler.WithGroup(name)}
}
