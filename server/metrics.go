package server

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/podsapi/podsapi/socket"
)

// Defaults of the metrics endpoint.
const (
	// DefaultMetricsTimeout bounds the reading of a scrape request and the
	// writing of its answer, and closes a connection idle for that long.
	DefaultMetricsTimeout = 10 * time.Second
	// DefaultMetricsMaxConnections is the number of connections the
	// metrics endpoint keeps open at once.
	DefaultMetricsMaxConnections = 16
	// metricsMaxHeaderBytes bounds the headers of a scrape request.
	metricsMaxHeaderBytes = 8 << 10
)

// unixPrefix marks a metrics address that is the path of a UNIX socket.
const unixPrefix = "unix:"

// listenMetrics listens on the metrics address of cfg, a TCP address or
// "unix:" and the path of a socket (created 0600, so that only the
// server's user can scrape), and returns the listener, bounded to
// cfg.MetricsMaxConnections, and the server of /metrics.
func listenMetrics(cfg Config) (*connListener, *http.Server, error) {
	var (
		l   net.Listener
		err error
	)
	if path, ok := strings.CutPrefix(cfg.MetricsAddress, unixPrefix); ok {
		l, err = socket.Listen(path)
	} else {
		l, err = net.Listen("tcp", cfg.MetricsAddress)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("listen for metrics on %s: %w", cfg.MetricsAddress, err)
	}
	cl := newConnListener(l, cfg.MetricsMaxConnections, false, metricsConnMetrics, cfg.Registry, cfg.Logger)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{
		Registry: cfg.Registry,
		// A scrape that takes longer than the write timeout would be lost
		// anyway; a few at once are enough for any scraper.
		MaxRequestsInFlight: 4,
	}))
	to := cfg.MetricsTimeout
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: to,
		ReadTimeout:       to,
		WriteTimeout:      to,
		IdleTimeout:       to,
		MaxHeaderBytes:    metricsMaxHeaderBytes,
		// An idle (or new) connection may be shed for a new one when the
		// slots are full: a scraper reconnects, an idle attacker loses.
		ConnState: func(c net.Conn, state http.ConnState) {
			if pc, ok := c.(*peerConn); ok {
				cl.setWaiting(pc, state == http.StateNew || state == http.StateIdle)
			}
		},
		ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
	}
	return cl, srv, nil
}
