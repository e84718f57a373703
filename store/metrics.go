package store

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/budget"
)

// Collectors returns the metrics of the store, read when they are
// gathered: its encodes, the versions refused for their size, the history
// kept for watches that resume, the deleted pods kept for FindPods, and the
// memory budget it counts against (WithBudget). The server registers them
// with its own.
func (s *Store) Collectors() []prometheus.Collector {
	cs := []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "podsapi_pod_encodes_total",
			Help: "Number of pod versions encoded by the store: each is encoded once, whatever the number of requests and watchers.",
		}, func() float64 { return float64(s.Encodes()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "podsapi_pods_too_large_total",
			Help: "Number of pod versions a source sent that the store refused for an encoding over --max-pod-bytes.",
		}, func() float64 { return float64(s.TooLarge()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "podsapi_deleted_pods",
			Help: "Number of deleted pods kept findable by FindPods with include_deleted (bounded by --max-deleted-pods, for --deleted-pod-retention).",
		}, func() float64 { n, _ := s.DeletedLen(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "podsapi_deleted_pods_bytes",
			Help: "Bytes counted against --max-deleted-pods-bytes by the deleted pods kept: their last encodings plus 512 bytes each.",
		}, func() float64 { _, b := s.DeletedLen(); return float64(b) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "podsapi_watch_history_events",
			Help: "Number of changes the store keeps for watches that resume (bounded by --watch-history).",
		}, func() float64 { n, _ := s.HistoryLen(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "podsapi_watch_history_bytes",
			Help: "Bytes counted against --watch-history-bytes by the changes the store keeps: their pods' encodings plus 512 bytes each.",
		}, func() float64 { _, b := s.HistoryLen(); return float64(b) }),
	}
	return append(cs, budgetCollectors(s.budget)...)
}

// budgetCollectors returns the metrics of b, or none for a nil b.
func budgetCollectors(b *budget.Budget) []prometheus.Collector {
	if b == nil {
		return nil
	}
	cs := []prometheus.Collector{prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "podsapi_memory_budget_bytes",
		Help: "The memory budget (--memory-budget-bytes): the bytes the server may keep on behalf of its clients.",
	}, func() float64 { return float64(b.Total()) })}
	for k, name := range budget.KindNames {
		cs = append(cs,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name:        "podsapi_memory_used_bytes",
				Help:        "Bytes counted against the memory budget, by kind: views (masked pods and enveloped events cached by the pods), lists (cached ListPods responses), snapshots (enveloped watch snapshots in flight), replays (enveloped blocks of the history for resumed watches), queued (live events queued for watchers), history, runtime (the container runtime's facts from NRI, for FindPods) and waiters (FindPods calls waiting for their key).",
				ConstLabels: prometheus.Labels{"kind": name},
			}, func() float64 { return float64(b.Used(budget.Kind(k))) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name:        "podsapi_memory_refused_total",
				Help:        "Number of times the memory budget refused to keep bytes, by kind: the cache kept nothing more, or the request was refused.",
				ConstLabels: prometheus.Labels{"kind": name},
			}, func() float64 { return float64(b.Refused(budget.Kind(k))) }),
		)
	}
	return cs
}
