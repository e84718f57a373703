package kubelethttp

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/source/internal/sourcemetrics"
)

// sourceLabel is the value of the source label of the metrics.
const sourceLabel = "kubelet-http"

// The values of the reason label of podsapi_source_errors_total. Every value
// is exported (at zero) from the start.
const (
	// reasonRequest is a request without an answer: the kubelet is down,
	// refuses the connection, or the TLS handshake failed.
	reasonRequest = "request"
	// reasonTimeout is a poll that took longer than the request timeout.
	reasonTimeout = "timeout"
	// reasonUnauthorized is a 401 or 403 answer: a wrong or expired token
	// or certificate, or missing RBAC (nodes/proxy).
	reasonUnauthorized = "unauthorized"
	// reasonStatus is any other status than 200.
	reasonStatus = "status"
	// reasonTooLarge is a body larger than the limit.
	reasonTooLarge = "too_large"
	// reasonDecode is a body that is not a JSON v1 PodList.
	reasonDecode = "decode"
	// reasonToken is a token file that cannot be read or is empty.
	reasonToken = "token"
	// reasonInvalid is a pod of the list without a UID, or with the UID
	// of an earlier pod; the pod is skipped, the poll succeeds.
	reasonInvalid = "invalid"
)

var reasons = []string{reasonRequest, reasonTimeout, reasonUnauthorized, reasonStatus, reasonTooLarge, reasonDecode, reasonToken, reasonInvalid}

// newMetrics makes the source's metrics and registers them with reg
// unless reg is nil.
func newMetrics(reg prometheus.Registerer) *sourcemetrics.Metrics {
	return sourcemetrics.New(reg, sourceLabel, reasons...)
}
