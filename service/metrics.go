package service

import (
	"context"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1/podsv1alpha1connect"
)

// APIVersion is the value of the server_api_version label.
const APIVersion = "v1alpha1"

// Metrics counts the requests of the Pods API and the watch events dropped
// for slow watchers. It is also the interceptor that counts requests.
type Metrics struct {
	requests *prometheus.CounterVec
	list     *prometheus.CounterVec
	get      *prometheus.CounterVec
	watch    *prometheus.CounterVec
	dropped  prometheus.Counter
}

// NewMetrics creates the metrics of the Pods API and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	labels := []string{"server_api_version", "status_code"}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
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
	reg.MustRegister(m.requests, m.list, m.get, m.watch, m.dropped)
	for _, c := range []*prometheus.CounterVec{m.requests, m.list, m.get, m.watch} {
		c.WithLabelValues(APIVersion, codes.OK.String())
	}
	return m
}

// observe counts one finished request of procedure.
func (m *Metrics) observe(procedure string, err error) {
	code := codes.OK.String()
	if err != nil {
		code = codes.Code(connect.CodeOf(err)).String()
	}
	m.requests.WithLabelValues(APIVersion, code).Inc()
	var c *prometheus.CounterVec
	switch procedure {
	case podsv1alpha1connect.PodsListPodsProcedure:
		c = m.list
	case podsv1alpha1connect.PodsGetPodProcedure:
		c = m.get
	case podsv1alpha1connect.PodsWatchPodsProcedure:
		c = m.watch
	default:
		return
	}
	c.WithLabelValues(APIVersion, code).Inc()
}

// droppedEvents counts events lost by a dropped watcher.
func (m *Metrics) droppedEvents(lost int) { m.dropped.Add(float64(lost)) }

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
