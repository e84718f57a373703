package workload

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Resolver's metrics (WithRegisterer).
type metrics struct {
	gets   *prometheus.CounterVec
	owners prometheus.GaugeFunc
	age    prometheus.GaugeFunc
}

// WithRegisterer registers the Resolver's metrics with reg:
// podsapi_workload_gets_total by owner kind and result,
// podsapi_workload_owners and, with WithSlice, podsapi_workload_slice_age_seconds.
// The default registers none.
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
			Help: "Gets sent to the API server to resolve the workloads of the node's pods (--workloads=apiserver: metadata of ReplicaSets and Jobs) and, for the node view, the objects of the node's slice, by the object's kind (ReplicaSet, Job, Deployment, CronJob, StatefulSet, DaemonSet, Namespace) and result: found, gone (no such object under the UID its pods reference) or error (the last known answer is kept, and the get retried).",
		}, []string{"kind", "result"}),
		owners: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "podsapi_workload_owners",
			Help: "Objects whose answers the workload resolution keeps while a pod of the node references them: the ReplicaSets and Jobs of the node's pods and, for the node view, every object of the node's slice (their Deployments and CronJobs, StatefulSets, DaemonSets, namespaces).",
		}, func() float64 {
			r.mu.Lock()
			defer r.mu.Unlock()
			return float64(len(r.owners))
		}),
	}
	r.registerer.MustRegister(r.metrics.gets, r.metrics.owners)
	if r.slice.on {
		r.metrics.age = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "podsapi_workload_slice_age_seconds",
			Help: "How long ago the API server last confirmed the oldest object of the node's slice that the node view serves (about --workload-refresh while it answers; growing while it is unreachable, the objects kept as they were).",
		}, func() float64 { return r.Age().Seconds() })
		r.registerer.MustRegister(r.metrics.age)
	}
}

// countGet counts a get of an owner of kind with result.
func (r *Resolver) countGet(kind, result string) {
	if r.metrics != nil {
		r.metrics.gets.WithLabelValues(kind, result).Inc()
	}
}
