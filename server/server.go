// Package server serves the Pods API, gRPC health and gRPC reflection over
// h2c on a UNIX socket, and Prometheus metrics on a TCP address.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/time/rate"

	"github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/service"
	"github.com/podsapi/podsapi/socket"
)

// Defaults of Config.
const (
	DefaultQPS             = 100
	DefaultBurst           = 10
	DefaultShutdownTimeout = 10 * time.Second
	DefaultMaxStreams      = 1000
	DefaultMetricsAddress  = "127.0.0.1:10265"
)

// Config configures a Server. Zero values take the documented defaults.
type Config struct {
	// Socket is the path of the UNIX socket. Default socket.DefaultPath.
	Socket string
	// MetricsAddress is the TCP address of the /metrics endpoint; empty
	// serves no metrics endpoint (metrics are still kept in Registry).
	MetricsAddress string
	// QPS and Burst set the rate limit shared by ListPods and GetPod.
	// Defaults DefaultQPS and DefaultBurst; a negative QPS disables the limit.
	QPS   float64
	Burst int
	// WatchQueue is how many live events a watcher may have queued before it
	// is dropped. Default service.DefaultWatchQueue.
	WatchQueue int
	// MaxStreams is the number of concurrent HTTP/2 streams (calls, watches
	// included) per connection. Default DefaultMaxStreams.
	MaxStreams int
	// ShutdownTimeout bounds the graceful shutdown. Default
	// DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Logger receives the server's logs. Default slog.Default().
	Logger *slog.Logger
	// Registry receives the server's metrics. Default a new registry with the
	// Go and process collectors.
	Registry *prometheus.Registry
}

// Store is the pod store the server serves: the service's Store, plus a way
// to learn when it has synced.
type Store interface {
	service.Store
	// SyncedC returns a channel that is closed when the store has synced.
	SyncedC() <-chan struct{}
}

// Server serves the Pods API of one Store.
type Server struct {
	cfg      Config
	store    Store
	listener net.Listener
	metrics  net.Listener
	http     *http.Server
	mhttp    *http.Server
	health   *grpchealth.StaticChecker
	shutdown chan struct{}
}

// New listens on cfg.Socket (and cfg.MetricsAddress) and returns a Server
// ready to Serve st. The socket accepts connections when New returns.
func New(st Store, cfg Config) (*Server, error) {
	cfg = withDefaults(cfg)
	s := &Server{cfg: cfg, store: st, shutdown: make(chan struct{})}

	metrics := service.NewMetrics(cfg.Registry)
	if enc, ok := st.(interface{ Encodes() uint64 }); ok {
		cfg.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "podsapi_pod_encodes_total",
			Help: "Number of pod versions encoded by the store: each is encoded once, whatever the number of requests and watchers.",
		}, func() float64 { return float64(enc.Encodes()) }))
	}
	var limiter service.Limiter
	if cfg.QPS >= 0 {
		limiter = rate.NewLimiter(rate.Limit(cfg.QPS), cfg.Burst)
	}
	pods := service.New(st,
		service.WithWatchQueue(cfg.WatchQueue),
		service.WithMetrics(metrics),
		service.WithShutdown(s.shutdown),
		service.WithLogger(cfg.Logger),
	)
	s.health = grpchealth.NewStaticChecker(podsv1alpha1connect.PodsName)
	s.health.SetStatus("", grpchealth.StatusNotServing)
	s.health.SetStatus(podsv1alpha1connect.PodsName, grpchealth.StatusNotServing)
	reflector := grpcreflect.NewStaticReflector(podsv1alpha1connect.PodsName, grpchealth.HealthV1ServiceName)

	mux := http.NewServeMux()
	podsPath, podsHandler := podsv1alpha1connect.NewPodsHandler(pods, service.HandlerOptions(metrics, st.Synced, limiter)...)
	mux.Handle(podsPath, service.BatchWatchFlushes(podsHandler))
	mux.Handle(grpchealth.NewHandler(s.health))
	mux.Handle(grpcreflect.NewHandlerV1(reflector))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector))

	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	s.http = &http.Server{
		Handler:           mux,
		Protocols:         protocols,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams:      cfg.MaxStreams,
			MaxDecoderHeaderTableSize: 16 << 10,
		},
		ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
	}

	l, err := socket.Listen(cfg.Socket)
	if err != nil {
		return nil, err
	}
	s.listener = l
	if cfg.MetricsAddress != "" {
		ml, err := net.Listen("tcp", cfg.MetricsAddress)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("listen for metrics on %s (choose another address with --metrics-address): %w", cfg.MetricsAddress, err)
		}
		s.metrics = ml
		mmux := http.NewServeMux()
		mmux.Handle("/metrics", promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{Registry: cfg.Registry}))
		s.mhttp = &http.Server{Handler: mmux, ReadHeaderTimeout: 10 * time.Second}
	}
	return s, nil
}

// withDefaults fills the zero fields of cfg.
func withDefaults(cfg Config) Config {
	if cfg.Socket == "" {
		cfg.Socket = socket.DefaultPath
	}
	if cfg.QPS == 0 {
		cfg.QPS = DefaultQPS
	}
	if cfg.Burst == 0 {
		cfg.Burst = DefaultBurst
	}
	if cfg.WatchQueue == 0 {
		cfg.WatchQueue = service.DefaultWatchQueue
	}
	if cfg.MaxStreams == 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
		cfg.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return cfg
}

// SocketPath returns the path of the socket the server listens on.
func (s *Server) SocketPath() string { return s.cfg.Socket }

// MetricsAddr returns the address of the metrics endpoint, or nil.
func (s *Server) MetricsAddr() net.Addr {
	if s.metrics == nil {
		return nil
	}
	return s.metrics.Addr()
}

// Serve serves until ctx is done, then shuts down: health turns NOT_SERVING,
// no new connection is accepted, open watches end with UNAVAILABLE, and
// in-flight calls get up to ShutdownTimeout to finish before their
// connections are closed. The socket file is removed. Serve returns nil after
// a shutdown caused by ctx.
func (s *Server) Serve(ctx context.Context) error {
	log := s.cfg.Logger
	errc := make(chan error, 2)
	var wg sync.WaitGroup
	wg.Go(func() { errc <- serveHTTP(s.http, s.listener) })
	if s.mhttp != nil {
		wg.Go(func() { errc <- serveHTTP(s.mhttp, s.metrics) })
	}
	wg.Go(func() {
		select {
		case <-s.store.SyncedC():
			log.Info("pod sources synced: serving")
			s.health.SetStatus("", grpchealth.StatusServing)
			s.health.SetStatus(podsv1alpha1connect.PodsName, grpchealth.StatusServing)
		case <-s.shutdown:
		}
	})

	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	log.Info("shutting down", "timeout", s.cfg.ShutdownTimeout)
	s.health.SetStatus("", grpchealth.StatusNotServing)
	s.health.SetStatus(podsv1alpha1connect.PodsName, grpchealth.StatusNotServing)
	close(s.shutdown)
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	if serr := s.http.Shutdown(sctx); serr != nil {
		log.Warn("shutdown timed out: closing the remaining connections", "error", serr)
		s.http.Close()
	}
	if s.mhttp != nil {
		s.mhttp.Close()
	}
	s.listener.Close()
	wg.Wait()
	return err
}

// serveHTTP serves srv on l and reports only unexpected errors.
func serveHTTP(srv *http.Server, l net.Listener) error {
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
