// Package sourcemetrics holds the metrics every pod source that reads from a
// peer exports: its errors by reason and the time of its last success. The
// collectors are shared by every source registered on one registry.
package sourcemetrics

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts the errors and the last success of one source.
type Metrics struct {
	source      string
	errors      *prometheus.CounterVec
	lastSuccess prometheus.Gauge
}

// New makes the metrics of the source named source, exporting every reason
// at zero from the start, and registers them with reg unless reg is nil.
// Collectors that reg holds already, registered by another source, are
// reused. It panics on any other registration error, as
// prometheus.MustRegister does.
func New(reg prometheus.Registerer, source string, reasons ...string) *Metrics {
	errs := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "podsapi", Subsystem: "source", Name: "errors_total",
		Help: "Errors of the pod sources, by source and reason.",
	}, []string{"source", "reason"}))
	last := register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "podsapi", Subsystem: "source", Name: "last_success_timestamp_seconds",
		Help: "Unix time of the last successful read of each pod source.",
	}, []string{"source"}))
	for _, r := range reasons {
		errs.WithLabelValues(source, r)
	}
	return &Metrics{source: source, errors: errs, lastSuccess: last.WithLabelValues(source)}
}

// register registers c with reg, or returns the equal collector reg has.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		panic(fmt.Errorf("register pod source metrics: %w", err))
	}
	existing, ok := are.ExistingCollector.(C)
	if !ok {
		panic(fmt.Errorf("register pod source metrics: the existing collector is a %T", are.ExistingCollector))
	}
	return existing
}

// CountError counts one error for reason.
func (m *Metrics) CountError(reason string) { m.errors.WithLabelValues(m.source, reason).Inc() }

// Success records a successful read at now.
func (m *Metrics) Success(now time.Time) { m.lastSuccess.Set(float64(now.UnixNano()) / 1e9) }
