package door

import (
	"bufio"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
	"net"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// The values of the route label: the node's pods answered by the door
// itself, or a request passed to the API server.
const (
	routeLocal   = "local"
	routeProxied = "proxied"
)

// metrics counts the door's requests.
type metrics struct {
	requests *prometheus.CounterVec
	inFlight *prometheus.GaugeVec
	watches  *prometheus.CounterVec
}

// newMetrics creates the door's metrics and registers them with reg, if
// not nil.
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "podsapi_kube_api_requests_total",
			Help: "Number of requests to podsapi's Kubernetes API (--kube-api-address, --kube-api-socket), by route (local: the node's pods, answered by podsapi; proxied: passed to the API server), verb (get, list, watch, create, update, patch, delete, or other) and HTTP status code (499: the client left first), counted when answered: a watch when it ends.",
		}, []string{"route", "verb", "code"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "podsapi_kube_api_requests_in_flight",
			Help: "Number of requests to podsapi's Kubernetes API being answered now (open watches and upgraded connections included), by route.",
		}, []string{"route"}),
		watches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "podsapi_kube_api_watches_ended_total",
			Help: "Number of watches of the node's pods answered by podsapi's Kubernetes API that ended, by reason: timeout (their timeoutSeconds), cancelled (the client left, or podsapi shut down), expired (the resourceVersion asked is no longer held: 410), stalled (a write did not complete within the write timeout: a client that stopped reading), behind (more changes waiting than the watch's queue) or failed (an event could not be written). stalled, behind and failed are also logged.",
		}, []string{"reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.inFlight, m.watches)
	}
	return m
}

// start counts a request of route in flight, and returns what counts it
// answered.
func (m *metrics) start(route string) func(verb string, code int) {
	g := m.inFlight.WithLabelValues(route)
	g.Inc()
	return func(verb string, code int) {
		g.Dec()
		m.requests.WithLabelValues(route, verb, strconv.Itoa(code)).Inc()
	}
}

// requestInfo reads a request's path as the API server does (its
// RequestInfoFactory), for verbOf.
var requestInfo = &request.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

// verbOf names the Kubernetes verb of r as the API server names it (a GET
// of a collection is a list, with watch=true a watch), from a bounded set
// of values: get, list, watch, create, update, patch, delete, or other.
func verbOf(r *http.Request) string {
	if info, err := requestInfo.NewRequestInfo(r); err == nil && info.IsResourceRequest {
		switch info.Verb {
		case "get", "list", "watch", "create", "update", "patch", "delete":
			return info.Verb
		case "deletecollection":
			return "delete"
		}
		return "other"
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return "other"
}

// recorder remembers the status code written through it. It keeps the
// Flusher of the writer it wraps, and Unwrap gives http.ResponseController
// the rest (hijacking, for upgrades; deadlines).
type recorder struct {
	http.ResponseWriter
	code int
}

func (r *recorder) WriteHeader(code int) {
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		// An informational answer (100 Continue, 103 Early Hints): the
		// final status follows.
		r.ResponseWriter.WriteHeader(code)
		return
	}
	if r.code == 0 {
		r.code = code
	}
	if code == statusClientClosed {
		return // Counted, never sent.
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.WriteHeader(http.StatusOK)
	}
	return r.ResponseWriter.Write(b)
}

// Flush sends what is buffered, for the watches of the Local side.
func (r *recorder) Flush() { _ = r.FlushError() }

// FlushError is Flush, returning its error, for http.ResponseController:
// a watch whose flush failed (a stream reset after the write timeout)
// learns it, and ends as stalled.
func (r *recorder) FlushError() error {
	if r.code == 0 {
		r.WriteHeader(http.StatusOK)
	}
	return http.NewResponseController(r.ResponseWriter).Flush()
}

// Hijack takes the connection over, for upgrades passed through.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if r.code == 0 {
		r.code = http.StatusSwitchingProtocols
	}
	return http.NewResponseController(r.ResponseWriter).Hijack()
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// status returns the code written, or 200 when none was.
func (r *recorder) status() int {
	if r.code == 0 {
		return http.StatusOK
	}
	return r.code
}
