package service

import (
	"context"
	"sync/atomic"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1/v1alpha1connect"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
)

// APIVersion is the value of the server_api_version label.
const APIVersion = "v1alpha1"

// Metrics counts the requests of the Pods API and the watch events dropped
// for slow watchers. It is also the interceptor that counts requests.
type Metrics struct {
	requests *codeCounters
	list     *codeCounters
	get      *codeCounters
	watch    *codeCounters
	dropped  prometheus.Counter
	computes [numViews]prometheus.Counter
	hits     [numViews]prometheus.Counter
	// snapshots and snapshotBytes are the enveloped watch snapshots in
	// flight, and their bytes.
	snapshots     prometheus.Gauge
	snapshotBytes prometheus.Gauge
	// responses and responsesRefused are the bytes of the unary responses
	// in flight and the calls refused for them (inflight.go).
	responses        prometheus.Gauge
	responsesRefused prometheus.Counter
}

// viewKind is a kind of shared view.
type viewKind int

// The kinds of shared views.
const (
	viewMask     viewKind = iota // a pod version trimmed by a field mask
	viewWatch                    // an encoded watch event of a pod version, type and mask
	viewList                     // a ListPods response of a store version and mask
	viewSnapshot                 // the enveloped snapshot of a watch of a store version, mask, selection and wire
	viewReplay                   // an enveloped block of the history replayed to resumed watches
	numViews
)

// viewLabels are the values of the view label, by kind.
var viewLabels = [numViews]string{"mask", "watch", "list", "snapshot", "replay"}

// NewMetrics creates the metrics of the Pods API and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	labels := []string{"server_api_version", "status_code"}
	counter := func(name, help string) *codeCounters {
		return &codeCounters{vec: prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)}
	}
	m := &Metrics{
		requests: counter("kubelet_pod_requests_total", "Cumulative number of requests to the Pods API."),
		list:     counter("kubelet_pod_requests_list_total", "Number of requests to the ListPods endpoint of the Pods API."),
		get:      counter("kubelet_pod_requests_get_total", "Number of requests to the GetPod endpoint of the Pods API."),
		watch:    counter("kubelet_pod_requests_watch_total", "Number of requests to the WatchPods endpoint of the Pods API, counted with the code the watch ended with."),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubelet_pod_watch_events_dropped_total",
			Help: "Number of watch events dropped because a client was not consuming its event stream quickly enough.",
		}),
	}
	computes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "podsapi_view_computes_total",
		Help: "Number of shared views computed, by kind: mask (a pod version trimmed by a field mask), watch (an encoded watch event), list (a ListPods response of a store version and mask), snapshot (the enveloped snapshot of a new watch of a store version, mask, selection and wire) and replay (a block of 128 changes of the history enveloped for resumed watches of a mask, selection and wire).",
	}, []string{"view"})
	hits := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "podsapi_view_cache_hits_total",
		Help: "Number of times a shared view was reused instead of computed, by kind.",
	}, []string{"view"})
	m.snapshots = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "podsapi_watch_snapshots",
		Help: "Number of enveloped watch snapshots in flight: built or being built, being written to at least one watcher, or kept for the next watch waiting for its snapshot turn.",
	})
	m.snapshotBytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "podsapi_watch_snapshots_bytes",
		Help: "Bytes of the enveloped watch snapshots in flight.",
	})
	m.responses = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "podsapi_responses_in_flight_bytes",
		Help: "Bytes of the ListPods, GetPod and FindPods responses being written, bounded by half the memory budget.",
	})
	m.responsesRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "podsapi_responses_refused_total",
		Help: "Number of calls refused RESOURCE_EXHAUSTED MEMORY_BUDGET_EXCEEDED because their client's responses in flight held its share.",
	})
	reg.MustRegister(m.requests.vec, m.list.vec, m.get.vec, m.watch.vec, m.dropped, computes, hits, m.snapshots, m.snapshotBytes, m.responses, m.responsesRefused)
	for k, label := range viewLabels {
		m.computes[k] = computes.WithLabelValues(label)
		m.hits[k] = hits.WithLabelValues(label)
	}
	for _, c := range []*codeCounters{m.requests, m.list, m.get, m.watch} {
		c.counter(codes.OK)
	}
	return m
}

// observe counts one finished request of procedure. The calls of both wires
// count alike, with the same server_api_version: the kubelet's metrics have
// no label that would tell them apart.
func (m *Metrics) observe(procedure string, err error) {
	code := codes.OK
	if err != nil {
		code = codes.Code(connect.CodeOf(err))
	}
	m.requests.counter(code).Inc()
	var c *codeCounters
	switch procedure {
	case podsv1alpha1connect.PodsListPodsProcedure, v1alpha1connect.PodsListPodsProcedure:
		c = m.list
	case podsv1alpha1connect.PodsGetPodProcedure, v1alpha1connect.PodsGetPodProcedure:
		c = m.get
	case podsv1alpha1connect.PodsWatchPodsProcedure, v1alpha1connect.PodsWatchPodsProcedure:
		c = m.watch
	default:
		return
	}
	c.counter(code).Inc()
}

// codeCounters is a counter vector of the seed's labels whose series are
// looked up once per code, not hashed on every request. A series is
// created on first use, so that /metrics lists only the codes seen.
type codeCounters struct {
	vec    *prometheus.CounterVec
	byCode [numCodes]atomic.Pointer[prometheus.Counter]
}

// numCodes bounds the gRPC codes (OK to UNAUTHENTICATED).
const numCodes = 17

// counter returns the series of code.
func (c *codeCounters) counter(code codes.Code) prometheus.Counter {
	if code >= numCodes {
		return c.vec.WithLabelValues(APIVersion, code.String())
	}
	if p := c.byCode[code].Load(); p != nil {
		return *p
	}
	counter := c.vec.WithLabelValues(APIVersion, code.String())
	c.byCode[code].Store(&counter)
	return counter
}

// responsesHeld counts n more bytes of responses in flight (fewer when
// negative). m may be nil.
func (m *Metrics) responsesHeld(n int64) {
	if m != nil {
		m.responses.Add(float64(n))
	}
}

// responseRefused counts a call refused for its responses in flight. m may
// be nil.
func (m *Metrics) responseRefused() {
	if m != nil {
		m.responsesRefused.Inc()
	}
}

// droppedEvents counts events lost by a dropped watcher. m may be nil.
func (m *Metrics) droppedEvents(lost int) {
	if m != nil {
		m.dropped.Add(float64(lost))
	}
}

// viewUsed counts one use of a shared view of kind view, computed for this
// use or reused. m may be nil.
func (m *Metrics) viewUsed(view viewKind, computed bool) {
	switch {
	case m == nil:
	case computed:
		m.computes[view].Inc()
	default:
		m.hits[view].Inc()
	}
}

// snapshotsInFlight adds n snapshots of bytes bytes to those in flight. m
// may be nil.
func (m *Metrics) snapshotsInFlight(n, bytes int) {
	if m != nil {
		m.snapshots.Add(float64(n))
		m.snapshotBytes.Add(float64(bytes))
	}
}

// WrapUnary counts a unary request with the code it ended with.
func (m *Metrics) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		resp, err := next(ctx, req)
		m.observe(req.Spec().Procedure, err)
		return resp, err
	}
}

// WrapStreamingClient returns next: Metrics only counts handled requests.
func (m *Metrics) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler counts a stream with the code it ended with.
func (m *Metrics) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		err := next(ctx, conn)
		m.observe(conn.Spec().Procedure, err)
		return err
	}
}
