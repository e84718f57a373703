// Package server serves the Pods API, in its typed form
// (kubelet.pods.v1alpha1.Pods) and in the kubelet's own (v1alpha1.Pods, pods
// as bytes), gRPC health and gRPC reflection over h2c on a UNIX socket, and
// Prometheus metrics on a TCP address.
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/user"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/podsapi/podsapi/budget"
	"github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1/v1alpha1connect"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/guard"
	"github.com/podsapi/podsapi/internal/admit"
	"github.com/podsapi/podsapi/internal/buildinfo"
	"github.com/podsapi/podsapi/nri"
	"github.com/podsapi/podsapi/podcgroup"
	"github.com/podsapi/podsapi/server/internal/transport"
	"github.com/podsapi/podsapi/service"
	"github.com/podsapi/podsapi/socket"
)

// Pods are the pods the server serves, whatever sources feed them: read
// through the service's PodReader, plus a way to learn when they have
// synced. *store.Store implements it.
type Pods interface {
	service.PodReader
	// SyncedC returns a channel that is closed when the store has synced.
	SyncedC() <-chan struct{}
	// Budget returns the memory budget that the pods count what they keep
	// for clients against, and that the service's caches count against
	// too; nil for none.
	Budget() *budget.Budget
	// Collectors returns the metrics of the pods, which the server
	// registers with its own.
	Collectors() []prometheus.Collector
	// Sink takes the container runtime's facts, with --nri-socket.
	nri.Sink
	// ObserveReports has f told the delay between the runtime's report of
	// a container and the pod source's, as the pods learn it.
	ObserveReports(f func(time.Duration))
}

// Server serves the Pods API of the pods of one Pods.
type Server struct {
	cfg       Config
	pods      Pods
	transport *transport.Transport
	listener  net.Listener
	http      *http.Server
	metrics   *transport.Metrics // nil: no metrics endpoint
	health    *health
	shutdown  chan struct{}
	nri       *nri.Observer // nil: no NRI
}

// New listens on cfg.Socket (and cfg.MetricsAddress) and returns a Server
// ready to Serve st. The socket accepts connections when New returns.
//
// It is the one assembly of the server: podsapi-server, the tests and the
// conformance suite's self-test all serve through it (the self-test plants
// its faults with cfg.Hooks). It reads top to bottom: the access check, the
// transport, the guards and interceptors, the handlers of both wires,
// health and reflection on one mux, then the sockets.
func New(st Pods, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	socketOpts, err := cfg.Access.SocketOptions()
	if err != nil {
		return nil, err
	}
	cfg.Registry.MustRegister(st.Collectors()...)

	// The one access check: the transport's gate, in front of every
	// service but health.
	var access *guard.AccessGuard
	if !cfg.Access.AllowAnyPeer {
		access = guard.NewAccessGuard(&guard.AccessPolicy{UIDs: cfg.Access.AllowedUIDs, GIDs: cfg.Access.AllowedGIDs}, cfg.Registry, cfg.Logger)
	}
	tr := transport.New(transport.Config{
		MaxConnections:       cfg.Limits.MaxConnections,
		MaxDeniedConnections: DefaultMaxDeniedConnections,
		Access:               access,
		RequestReadTimeout:   cfg.Transport.RequestReadTimeout,
		MaxPendingPerClient:  cfg.Limits.MaxPendingPerClient,
		WriteStallTimeout:    cfg.Transport.WriteStallTimeout,
		MaxStreams:           cfg.Limits.MaxStreams,
		IdleTimeout:          cfg.Transport.IdleTimeout,
		KeepaliveInterval:    cfg.Transport.KeepaliveInterval,
		KeepaliveTimeout:     cfg.Transport.KeepaliveTimeout,
		Streams:              []string{podsv1alpha1connect.PodsWatchPodsProcedure, v1alpha1connect.PodsWatchPodsProcedure},
		PeerCred:             cfg.Hooks.PeerCred,
		Cgroup:               clientCgroups(cfg),
		ConnAccepted:         cfg.Hooks.ConnAccepted,
		ConnClosed:           cfg.Hooks.ConnClosed,
		Registry:             cfg.Registry,
		Logger:               cfg.Logger,
	})

	metrics := service.NewMetrics(cfg.Registry)
	opts := service.HandlerOptions(interceptors(cfg, metrics, newGuards(cfg, st))...)
	shutdown := make(chan struct{})
	handlers := service.NewHandlers(st,
		service.WithWorkloads(cfg.Workloads),
		service.WithWatchQueue(cfg.Watch.Queue),
		service.WithProgressInterval(cfg.Watch.ProgressInterval),
		service.WithMetrics(metrics),
		service.WithShutdown(shutdown),
		service.WithLogger(cfg.Logger),
		service.WithProcesses(podcgroup.NewReader(cfg.HostProc)),
		service.WithCaller(callerPID),
		service.WithBudget(st.Budget()),
		service.WithFindWait(max(cfg.Limits.MaxFindWait, 0), cfg.Limits.MaxFindWaiters, cfg.Limits.MaxFindWaitersPerClient),
		service.WithClient(func(ctx context.Context) string { return guard.PeerFrom(ctx).Client(ctx) }),
		service.WithStreams(func(ctx context.Context) service.Stream {
			if s := tr.Stream(ctx); s != nil {
				return s
			}
			return nil
		}),
	)
	pods, kubelet := handlers.Pods, handlers.Kubelet
	if cfg.Hooks.Pods != nil {
		pods = cfg.Hooks.Pods(pods)
	}
	if cfg.Hooks.Kubelet != nil {
		kubelet = cfg.Hooks.Kubelet(kubelet)
	}

	mux := http.NewServeMux()
	services := []string{podsv1alpha1connect.PodsName}
	mux.Handle(podsv1alpha1connect.NewPodsHandler(pods, opts...))
	if !cfg.NoKubeletWire {
		services = append(services, v1alpha1connect.PodsName)
		mux.Handle(v1alpha1connect.NewPodsHandler(kubelet, opts...))
	}
	// Health stays open to any peer that can connect, for liveness probes:
	// it tells nothing but whether the server serves. Reflection is
	// behind the access check like the API. Their requests are as small as
	// the API's; connect applies the cap to the inflated size of a
	// compressed request.
	limit := connect.WithReadMaxBytes(service.MaxRequestBytes)
	h := newHealth(services)
	mux.Handle(grpchealth.NewHandler(h.checker, limit))
	reflector := grpcreflect.NewStaticReflector(append(services, grpchealth.HealthV1ServiceName)...)
	mux.Handle(grpcreflect.NewHandlerV1(reflector, limit))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector, limit))

	httpServer := tr.Server(withVersion(handlers.TrackResponses(mux), buildinfo.Get()))
	if served := cfg.Hooks.Served; served != nil {
		next := httpServer.Handler
		httpServer.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer served(r)
			next.ServeHTTP(w, r)
		})
	}

	observer, err := newObserver(cfg, st)
	if err != nil {
		return nil, err
	}
	l, err := socket.Listen(cfg.Socket, socketOpts...)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:       cfg,
		pods:      st,
		transport: tr,
		listener:  tr.Listen(l),
		http:      httpServer,
		health:    h,
		shutdown:  shutdown,
		nri:       observer,
	}
	if cfg.Metrics.Address != "" {
		s.metrics, err = transport.ListenMetrics(transport.MetricsConfig{
			Address:        cfg.Metrics.Address,
			Timeout:        cfg.Metrics.Timeout,
			MaxConnections: cfg.Metrics.MaxConnections,
			Registry:       cfg.Registry,
			Logger:         cfg.Logger,
		})
		if err != nil {
			l.Close()
			return nil, err
		}
	}
	return s, nil
}

// withVersion returns h with the header buildinfo.Header set to v on every
// response: a client learns the server's version from any call (podsctl
// version from a health check), without an RPC of its own.
func withVersion(h http.Handler, v string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(buildinfo.Header, v)
		h.ServeHTTP(w, r)
	})
}

// clientCgroups returns what reads the cgroup file of a peer's process,
// which names the client its shares are counted under (guard.Peer.Client):
// <HostProc>/PID/cgroup, bounded in size and time by podcgroup.Reader, or
// the hook of a test.
func clientCgroups(cfg Config) func(context.Context, int32) (string, error) {
	if cfg.Hooks.Cgroup != nil {
		return cfg.Hooks.Cgroup
	}
	r := podcgroup.NewReader(cfg.HostProc)
	return func(ctx context.Context, pid int32) (string, error) { return r.ReadFile(ctx, int(pid)) }
}

// SocketOptions returns the permissions that a socket of the server is
// created with: SocketMode (its default when 0), and SocketGroup's number
// when it is set. The Kubernetes API's socket (--kube-api-socket) takes the
// same.
func (a AccessConfig) SocketOptions() ([]socket.Option, error) {
	a = a.withDefaults()
	opts := []socket.Option{socket.WithMode(a.SocketMode)}
	if a.SocketGroup != "" {
		gid, err := lookupGroup(a.SocketGroup)
		if err != nil {
			return nil, err
		}
		opts = append(opts, socket.WithGroup(gid))
	}
	return opts, nil
}

// newGuards returns the guards of the Pods API, registering their gauges.
// One set of guards serves both wires: one rate-limit bucket, one limit of
// open watches. Access is not among them: the transport checks it.
func newGuards(cfg Config, st Pods) guard.Guards {
	g := guard.Guards{
		Ready:   st.Synced,
		Tarpit:  guard.NewTarpit(cfg.Limits.RateLimitDelay, guard.DefaultTarpitCapacity),
		Watches: admit.NewSlots(cfg.Limits.MaxWatchers, cfg.Limits.MaxWatchersPerClient),
	}
	if cfg.Limits.QPS >= 0 {
		g.Limiter = rate.NewLimiter(rate.Limit(cfg.Limits.QPS), cfg.Limits.Burst)
	}
	switch {
	case cfg.Limits.PerClientQPS > 0:
		g.PerClient = admit.NewKeyedLimiter(cfg.Limits.PerClientQPS, cfg.Limits.PerClientBurst)
	case cfg.Limits.PerClientQPS == 0 && cfg.Limits.QPS >= 0:
		g.PerClient = admit.NewFairShareLimiter(cfg.Limits.QPS, cfg.Limits.Burst)
	}
	cfg.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "podsapi_rate_limit_delayed",
		Help: "Number of calls refused by a rate limit, and of watches refused before their first message, waiting --rate-limit-delay before their answer.",
	}, func() float64 { return float64(g.Tarpit.Waiting()) }))
	cfg.Registry.MustRegister(guard.NewClientWatches(g.Watches))
	cfg.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "podsapi_watches_open",
		Help: "Number of WatchPods streams open (bounded by --max-watchers).",
	}, func() float64 { return float64(g.Watches.Held()) }))
	return g
}

// The names of the interceptors of the Pods API that are not guards.
const (
	// InterceptorMetrics counts every request, refused ones included.
	InterceptorMetrics = "metrics"
	// InterceptorFieldMasks parses the field mask and hands it to the
	// handlers.
	InterceptorFieldMasks = "field-masks"
)

// interceptors returns the interceptor chain of the Pods API, outermost
// first, as cfg.Hooks.Interceptors leaves it.
func interceptors(cfg Config, metrics *service.Metrics, g guard.Guards) []connect.Interceptor {
	chain := []guard.Named{{Name: InterceptorMetrics, Interceptor: metrics}}
	chain = append(chain, guard.Chain(g)...)
	chain = append(chain, guard.Named{Name: InterceptorFieldMasks, Interceptor: service.FieldMasks()})
	if cfg.Hooks.Interceptors != nil {
		chain = cfg.Hooks.Interceptors(chain)
	}
	is := make([]connect.Interceptor, len(chain))
	for i, n := range chain {
		is[i] = n.Interceptor
	}
	return is
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
	if s.metrics != nil {
		wg.Go(func() { errc <- serveHTTP(s.metrics.Server, s.metrics.Listener) })
	}
	stopReaper := make(chan struct{})
	wg.Go(func() { s.transport.Run(stopReaper) })
	nctx, stopNRI := context.WithCancel(context.Background())
	defer stopNRI()
	if s.nri != nil {
		wg.Go(func() { s.nri.Run(nctx) })
	}
	wg.Go(func() {
		select {
		case <-s.pods.SyncedC():
			log.Info("pod sources synced: serving")
			s.health.set(grpchealth.StatusServing)
		case <-s.shutdown:
		}
	})

	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	log.Info("shutting down", "timeout", s.cfg.Transport.ShutdownTimeout)
	s.health.set(grpchealth.StatusNotServing)
	close(s.shutdown)
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.Transport.ShutdownTimeout)
	defer cancel()
	if serr := s.http.Shutdown(sctx); serr != nil {
		log.Warn("shutdown timed out: closing the remaining connections", "error", serr)
		s.http.Close()
	}
	if s.metrics != nil {
		s.metrics.Server.Close()
	}
	s.listener.Close()
	close(stopReaper)
	stopNRI()
	wg.Wait()
	return err
}

// health is the gRPC health of the server and of each service it serves,
// NOT_SERVING until the store has synced.
type health struct {
	checker  *grpchealth.StaticChecker
	services []string
}

func newHealth(services []string) *health {
	h := &health{checker: grpchealth.NewStaticChecker(services...), services: services}
	h.set(grpchealth.StatusNotServing)
	return h
}

// set sets the health of the server and of each service it serves.
func (h *health) set(status grpchealth.Status) {
	h.checker.SetStatus("", status)
	for _, name := range h.services {
		h.checker.SetStatus(name, status)
	}
}

// lookupGroup returns the number of a group given by name or number.
func lookupGroup(group string) (int, error) {
	if gid, err := strconv.Atoi(group); err == nil && gid >= 0 {
		return gid, nil
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		return 0, fmt.Errorf("socket group: %w", err)
	}
	return strconv.Atoi(g.Gid)
}

// serveHTTP serves srv on l and reports only unexpected errors.
func serveHTTP(srv *http.Server, l net.Listener) error {
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
