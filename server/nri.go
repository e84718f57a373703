package server

import (
	"errors"
	"time"

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
	sink, ok := st.(nri.Sink)
	if !ok {
		return nil, errors.New("an NRI socket is set, but the pods served take no runtime facts (a *store.Store does)")
	}
	m := nri.NewMetrics(cfg.Registry)
	if r, ok := st.(interface{ ObserveReports(func(time.Duration)) }); ok {
		r.ObserveReports(m.ObserveReport)
	}
	opts := []nri.Option{nri.WithLogger(cfg.Logger), nri.WithMetrics(m)}
	if h := cfg.Hooks; h != nil && h.NRIBackoff[0] > 0 {
		opts = append(opts, nri.WithBackoff(h.NRIBackoff[0], h.NRIBackoff[1]))
	}
	return nri.New(cfg.NRISocket, sink, opts...), nil
}
