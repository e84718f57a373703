package manifest

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// The values of the reason label of podsapi_manifest_errors_total. The set
// is fixed; every value is exported (at zero) from the start.
const (
	// reasonRead is a manifest file or the directory that cannot be read.
	reasonRead = "read"
	// reasonDecode is a document that is not a strictly valid v1 Pod:
	// bad YAML or JSON, an unknown or duplicate field, a wrong type, or an
	// apiVersion or kind other than v1 and Pod.
	reasonDecode = "decode"
	// reasonInvalid is a Pod that decodes but is not acceptable: no
	// metadata.name, a name or namespace that is not a valid Kubernetes
	// name, labels or annotations that the API server would refuse
	// (annotations over 256 KiB in all), or more than 1024 labels.
	reasonInvalid = "invalid"
	// reasonDuplicate is a Pod whose UID, or namespace and name, an earlier
	// manifest already provides.
	reasonDuplicate = "duplicate"
	// reasonTooLarge is a manifest file over the size cap, or a YAML
	// document whose aliases expand it beyond the cap (WithMaxFileBytes).
	reasonTooLarge = "too_large"
	// reasonNotRegular is a manifest name that is neither a regular file
	// nor a symbolic link to one, nor a directory: a FIFO, a socket, a
	// device, or a file of a kernel pseudo file system such as /proc.
	reasonNotRegular = "not_regular"
)

var reasons = []string{reasonRead, reasonDecode, reasonInvalid, reasonDuplicate, reasonTooLarge, reasonNotRegular}

type metrics struct {
	errors *prometheus.CounterVec
}

// newMetrics makes the metrics and registers them with reg unless reg is
// nil. A collector that reg already holds with the same description is
// reused, so several Sources can share a registerer. It panics on any
// other registration error, as prometheus.MustRegister does: that is a
// programming error (another metric with the same name).
func newMetrics(reg prometheus.Registerer) *metrics {
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "podsapi",
		Subsystem: "manifest",
		Name:      "errors_total",
		Help:      "Static pod manifest documents or files that were rejected, by reason (read, decode, invalid, duplicate, too_large, not_regular).",
	}, []string{"reason"})
	if reg != nil {
		if err := reg.Register(errs); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				panic(fmt.Errorf("manifest: register podsapi_manifest_errors_total: %w", err))
			}
			existing, ok := are.ExistingCollector.(*prometheus.CounterVec)
			if !ok {
				panic(fmt.Errorf("manifest: register podsapi_manifest_errors_total: existing collector is a %T", are.ExistingCollector))
			}
			errs = existing
		}
	}
	for _, r := range reasons {
		errs.WithLabelValues(r)
	}
	return &metrics{errors: errs}
}

func (m *metrics) countError(reason string) {
	m.errors.WithLabelValues(reason).Inc()
}
