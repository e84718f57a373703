package server

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/guard"
)

// callerPID returns the PID of the peer of the request's connection
// (SO_PEERCRED, read when the connection was accepted) for FindPods of the
// caller, and false when the connection told none: the kernel gives 0 for
// a peer whose PID namespace the server cannot see.
func callerPID(ctx context.Context) (int32, bool) {
	p := guard.PeerFrom(ctx)
	if p == nil || !p.Known || p.PID <= 0 {
		return 0, false
	}
	return p.PID, true
}

// registerDeleted registers the gauges of the deleted pods the store keeps
// for FindPods, read from deleted.
func registerDeleted(reg prometheus.Registerer, deleted func() (int, int64)) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "podsapi_deleted_pods",
			Help: "Number of deleted pods kept findable by FindPods with include_deleted (bounded by --max-deleted-pods, for --deleted-pod-retention).",
		}, func() float64 { n, _ := deleted(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "podsapi_deleted_pods_bytes",
			Help: "Bytes counted against --max-deleted-pods-bytes by the deleted pods kept: their last encodings plus 512 bytes each.",
		}, func() float64 { _, b := deleted(); return float64(b) }),
	)
}
