package apiserver

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/source/internal/sourcemetrics"
)

// sourceLabel is the value of the source label of the metrics.
const sourceLabel = "apiserver"

// The values of the reason label of podsapi_source_errors_total. Every value
// is exported (at zero) from the start.
const (
	// reasonList is a list that failed: the API server is unreachable,
	// refused the credentials, or answered an error.
	reasonList = "list"
	// reasonWatch is a watch that could not be opened.
	reasonWatch = "watch"
	// reasonExpired is a watch refused with 410 Gone because the
	// resource version it resumes from was compacted: a relist follows.
	reasonExpired = "expired"
)

var reasons = []string{reasonList, reasonWatch, reasonExpired}

// newMetrics makes the source's metrics and registers them with reg
// unless reg is nil.
func newMetrics(reg prometheus.Registerer) (*sourcemetrics.Metrics, *sourcemetrics.Connection) {
	return sourcemetrics.New(reg, sourceLabel, reasons...), sourcemetrics.NewConnection(reg, sourceLabel)
}
