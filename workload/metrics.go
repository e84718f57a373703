package workload

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Resolver's metrics (WithRegisterer).
type metrics struct {
	gets   *prometheus.CounterVec
	owners prometheus.GaugeFunc
}

// WithRegisterer registers the Resolver's metrics with reg:
// podsapi_workload_gets_total by owner kind and result, and
// podsapi_workload_owners. The default registers none.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(r *Resolver) { r.registerer = reg }
}

// register creates the Resolver's metrics and registers them, when a
// Registerer was given.
func (r *Resolver) register() {
	if r.registerer == nil {
		return
	}
	r.metrics = &metrics{
		gets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "podsapi_workload_gets_total",
			Help: "Metadata gets sent to the API server to resolve the workloads of the node's pods (--workloads=apiserver), by the owner's kind (ReplicaSet, Job) and result: found, gone (no such owner under the UID its pods reference) or error (the last known answer is kept, and the get retried).",
		}, []string{"kind", "result"}),
		owners: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "podsapi_workload_owners",
			Help: "ReplicaSets and Jobs whose answers the workload resolution keeps, while a pod of the node references them.",
		}, func() float64 {
			r.mu.Lock()
			defer r.mu.Unlock()
			return float64(len(r.owners))
		}),
	}
	r.registerer.MustRegister(r.metrics.gets, r.metrics.owners)
}

// countGet counts a get of an owner of kind with result.
func (r *Resolver) countGet(kind, result string) {
	if r.metrics != nil {
		r.metrics.gets.WithLabelValues(kind, result).Inc()
	}
}
