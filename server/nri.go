package server

import (
	"time"

	"github.com/podsapi/podsapi/nri"
)

// newObserver returns the observer of the runtime's NRI socket
// cfg.NRISocket feeding st, or nil without a socket or when st takes no
// runtime facts. Its metrics are registered, and st told to count the
// delay of the pod source behind the runtime.
func newObserver(cfg Config, st Pods) *nri.Observer {
	sink, ok := st.(nri.Sink)
	if cfg.NRISocket == "" || !ok {
		return nil
	}
	m := nri.NewMetrics(cfg.Registry)
	if r, ok := st.(interface{ ObserveReports(func(time.Duration)) }); ok {
		r.ObserveReports(m.ObserveReport)
	}
	opts := []nri.Option{nri.WithLogger(cfg.Logger), nri.WithMetrics(m)}
	if h := cfg.Hooks; h != nil {
		opts = append(opts, h.NRIOptions...)
		if h.NRISink != nil {
			sink = h.NRISink(sink)
		}
	}
	return nri.New(cfg.NRISocket, sink, opts...)
}
