package transport

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/podsapi/podsapi/httpguard"
	"github.com/podsapi/podsapi/socket"
)

// metricsMaxHeaderBytes bounds the headers of a scrape request.
const metricsMaxHeaderBytes = 8 << 10

// unixPrefix marks a metrics address that is the path of a UNIX socket.
const unixPrefix = "unix:"

// MetricsConfig configures the metrics endpoint.
type MetricsConfig struct {
	// Address is a TCP address, or "unix:" and the path of a socket.
	Address string
	// Timeout bounds the reading of a scrape request and the writing of
	// its answer, and closes connections idle that long.
	Timeout time.Duration
	// MaxConnections bounds the connections open at once: a new one takes
	// the slot of the oldest idle one, or is closed.
	MaxConnections int
	// Registry is what /metrics serves; Logger receives the logs.
	Registry *prometheus.Registry
	Logger   *slog.Logger
}

// Metrics is a listening metrics endpoint.
type Metrics struct {
	// Listener accepts its connections, at most MaxConnections at once.
	Listener net.Listener
	// Server serves /metrics on Listener.
	Server *http.Server
	addr   net.Addr
}

// Addr returns the address of the endpoint: for a UNIX socket, the name it
// was created under.
func (m *Metrics) Addr() net.Addr { return m.addr }

// ListenMetrics listens on cfg.Address, a TCP address or "unix:" and the
// path of a socket (created 0600, so that only the server's user can
// scrape), and returns the endpoint, its connections bounded to
// cfg.MaxConnections, ready to serve /metrics.
func ListenMetrics(cfg MetricsConfig) (*Metrics, error) {
	var (
		l   net.Listener
		err error
	)
	path, unix := strings.CutPrefix(cfg.Address, unixPrefix)
	if unix {
		l, err = socket.Listen(path)
	} else {
		l, err = net.Listen("tcp", cfg.Address)
	}
	if err != nil {
		return nil, fmt.Errorf("listen for metrics on %s: %w", cfg.Address, err)
	}
	m := &Metrics{addr: l.Addr()}
	if unix {
		// The listener's address is the name the socket was created under.
		m.addr = &net.UnixAddr{Name: path, Net: "unix"}
	}
	m.Listener = httpguard.NewListener(l, cfg.MaxConnections, httpguard.NewConnMetrics(metricsConnMetrics, cfg.Registry), metricsConnMetrics.What, cfg.Logger)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{
		Registry: cfg.Registry,
		// A scrape that takes longer than the write timeout would be lost
		// anyway; a few at once are enough for any scraper.
		MaxRequestsInFlight: 4,
	}))
	to := cfg.Timeout
	m.Server = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: to,
		ReadTimeout:       to,
		WriteTimeout:      to,
		IdleTimeout:       to,
		MaxHeaderBytes:    metricsMaxHeaderBytes,
		// An idle (or new) connection may be shed for a new one when the
		// slots are full: a scraper reconnects, an idle attacker loses.
		ConnState: httpguard.HoldStates,
		ErrorLog:  slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
	}
	return m, nil
}
