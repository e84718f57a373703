package kubeletgrpc

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/source/internal/sourcemetrics"
)

// sourceLabel is the value of the source label of the metrics.
const sourceLabel = "kubelet-grpc"

// The values of the reason label of podsapi_source_errors_total. Every value
// is exported (at zero) from the start.
const (
	// reasonConnect is a WatchPods call that could not be opened: the
	// socket is missing or does not answer, or the kubelet refused it.
	reasonConnect = "connect"
	// reasonStream is a stream that ended or broke.
	reasonStream = "stream"
	// reasonDecode is a pod whose bytes are not a v1.Pod.
	reasonDecode = "decode"
	// reasonProtocol is an event the Source does not expect: an unknown
	// type, a pod without a UID, or a second INITIAL_SYNC_COMPLETE.
	reasonProtocol = "protocol"
	// reasonResync is a resync's ListPods that failed: refused by the
	// kubelet's rate limit (RESOURCE_EXHAUSTED), or any other error.
	reasonResync = "resync"
	// reasonTooLarge is a snapshot abandoned beyond its bounds
	// (WithSnapshotBounds).
	reasonTooLarge = "too_large"
)

var reasons = []string{reasonConnect, reasonStream, reasonDecode, reasonProtocol, reasonResync, reasonTooLarge}

// newMetrics makes the source's metrics and registers them with reg
// unless reg is nil.
func newMetrics(reg prometheus.Registerer) *sourcemetrics.Metrics {
	return sourcemetrics.New(reg, sourceLabel, reasons...)
}
