package server

import (
	"github.com/podsapi/podsapi/nri"
)

// newObserver returns the observer of the runtime's NRI socket
// cfg.NRISocket feeding st, or nil without a socket; an error when st
// takes no runtime facts. Its metrics are registered, and st told to count
// the delay of the pod source behind the runtime.
func newObserver(cfg Config, st Pods) (*nri.Observer, error) {
	if cfg.NRISocket == "" {
		return nil, nil
	}
	m := nri.NewMetrics(cfg.Registry)
	st.ObserveReports(m.ObserveReport)
	opts := []nri.Option{nri.WithLogger(cfg.Logger), nri.WithMetrics(m)}
	if h := cfg.Hooks; h != nil && h.NRIBackoff[0] > 0 {
		opts = append(opts, nri.WithBackoff(h.NRIBackoff[0], h.NRIBackoff[1]))
	}
	return nri.New(cfg.NRISocket, st, opts...), nil
}
