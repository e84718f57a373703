package guard

import (
	"cmp"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/internal/admit"
)

// MaxClientSeries bounds the series of podsapi_client_watches: the clients
// holding the most watches each have one, the others are summed under
// client="other".
const MaxClientSeries = 20

// clientWatches is the collector of podsapi_client_watches.
type clientWatches struct {
	limit *admit.Slots
	desc  *prometheus.Desc
}

// NewClientWatches returns the collector of the watches each client holds
// (podsapi_client_watches{client}), by the name of Peer.Client: an operator
// sees which pod or unit holds the watches of the node. Its cardinality is
// bounded by MaxClientSeries (plus "other"), whatever the number of
// clients.
func NewClientWatches(w *admit.Slots) prometheus.Collector {
	return clientWatches{limit: w, desc: prometheus.NewDesc("podsapi_client_watches",
		"Number of WatchPods streams open by each client, named by its pod (pod/UID), its systemd unit (unit/NAME), its cgroup (cgroup/PATH) or its UID (uid/N): the "+
			"20 clients with most watches, the others summed as client=\"other\". Each client's share is --max-watchers-per-client, at most half of --max-watchers.",
		[]string{"client"}, nil)}
}

func (c clientWatches) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c clientWatches) Collect(ch chan<- prometheus.Metric) {
	type count struct {
		client string
		n      int
	}
	var counts []count
	c.limit.ByKey(func(client string, n int) { counts = append(counts, count{client, n}) })
	slices.SortFunc(counts, func(a, b count) int {
		return cmp.Or(cmp.Compare(b.n, a.n), cmp.Compare(a.client, b.client))
	})
	other := 0
	for i, k := range counts {
		if i >= MaxClientSeries {
			other += k.n
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(k.n), k.client)
	}
	if other > 0 {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(other), "other")
	}
}
