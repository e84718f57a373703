package httpguard

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// MetricNames names the metrics of a front end's connections and stalls.
type MetricNames struct {
	// Prefix starts every metric name: "podsapi" for the gRPC socket,
	// "podsapi_kube_api" for the door, "podsapi_metrics" for the metrics
	// endpoint.
	Prefix string
	// What the connections are to, in the help texts ("the API socket").
	What string
	// ConnFlag is the flag that bounds the connections, StallFlag the one
	// that sets the write-stall timeout, in the help texts.
	ConnFlag, StallFlag string
}

// ConnMetrics counts the connections of the Listeners that share it (the
// door's HTTPS listener and its UNIX socket share one): open, refused at
// once, and shed to make room.
type ConnMetrics struct {
	rejected prometheus.Counter
	shed     prometheus.Counter
	open     atomic.Int64
}

// NewConnMetrics returns the connection metrics of names, registered with
// reg (nil: registered nowhere, still counted):
// PREFIX_connections_rejected_total, PREFIX_connections_shed_total and
// PREFIX_connections_open.
func NewConnMetrics(names MetricNames, reg prometheus.Registerer) *ConnMetrics {
	m := &ConnMetrics{
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: names.Prefix + "_connections_rejected_total",
			Help: "Number of connections to " + names.What + " closed as soon as accepted because " + names.ConnFlag + " were open, each with work in flight for an authenticated caller (or refused by the access policy's share).",
		}),
		shed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: names.Prefix + "_connections_shed_total",
			Help: "Number of connections to " + names.What + " closed to make room for a new one because " + names.ConnFlag + " were open: one without work in flight for an authenticated caller, those on which no caller authenticated first, the one idle longest first.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.rejected, m.shed, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: names.Prefix + "_connections_open",
			Help: "Number of connections open on " + names.What + ".",
		}, func() float64 { return float64(m.open.Load()) }))
	}
	return m
}

// Open returns the number of connections open.
func (m *ConnMetrics) Open() int64 { return m.open.Load() }
