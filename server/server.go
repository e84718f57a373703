// Package server serves the Pods API, in its typed form
// (kubelet.pods.v1alpha1.Pods) and in the kubelet's own (v1alpha1.Pods, pods
// as bytes), gRPC health and gRPC reflection over h2c on a UNIX socket, and
// Prometheus metrics on a TCP address.
package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/time/rate"

	"github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/gen/v1alpha1/v1alpha1connect"
	"github.com/podsapi/podsapi/guard"
	"github.com/podsapi/podsapi/podcgroup"
	"github.com/podsapi/podsapi/service"
	"github.com/podsapi/podsapi/socket"
)

// Defaults of Config.
const (
	DefaultQPS             = 100
	DefaultBurst           = 10
	DefaultShutdownTimeout = 10 * time.Second
	DefaultMetricsAddress  = "127.0.0.1:10265"
	// DefaultMaxStreams and DefaultMaxConnections bound the streams that
	// can be open at once, 25,600: every stream costs net/http a goroutine
	// before any handler runs, and a root client holding that many fits the
	// DaemonSet's 256 MiB (142 MiB peak measured; 100 × 1,000 was
	// OOM-killed under 256 MiB with the former 1,000 streams per
	// connection).
	DefaultMaxStreams     = 100
	DefaultMaxConnections = 256

	DefaultMaxWatchers       = 10000
	DefaultMaxWatchersPerUID = 1000
	// DefaultMaxDeniedConnections is how many connections a peer UID that
	// --allowed-uids and --allowed-gids deny may keep open: it may only
	// call health.
	DefaultMaxDeniedConnections = 8
	DefaultIdleTimeout          = 5 * time.Minute
	DefaultKeepaliveInterval    = time.Minute
	DefaultKeepaliveTimeout     = 20 * time.Second
	DefaultWriteStallTimeout    = 30 * time.Second
	// DefaultRateLimitDelay is how long a call refused by a rate limit
	// waits before it is answered.
	DefaultRateLimitDelay = 100 * time.Millisecond
	// DefaultPerClientBurst is the burst of each client's bucket when
	// PerClientQPS is set without PerClientBurst.
	DefaultPerClientBurst = 5
)

// DefaultAllowedUIDs returns the UIDs allowed by default: root and the
// server's own user (the same when the server runs as root).
func DefaultAllowedUIDs() []uint32 {
	uids := []uint32{0}
	if euid := os.Geteuid(); euid > 0 {
		uids = append(uids, uint32(euid))
	}
	return uids
}

// Config configures a Server. Zero values take the documented defaults.
type Config struct {
	// Socket is the path of the UNIX socket. Default socket.DefaultPath.
	Socket string
	// MetricsAddress is the TCP address of the /metrics endpoint, or
	// "unix:" followed by the path of a UNIX socket (created 0600); empty
	// serves no metrics endpoint (metrics are still kept in Registry).
	MetricsAddress string
	// MetricsTimeout bounds the reading of a scrape request and the writing
	// of its answer, and closes metrics connections idle that long.
	// MetricsMaxConnections bounds the metrics connections open at once: a
	// new one takes the slot of the oldest idle one, or is closed. Defaults
	// DefaultMetricsTimeout and DefaultMetricsMaxConnections.
	MetricsTimeout        time.Duration
	MetricsMaxConnections int
	// RequestReadTimeout is how long a call may take to send its request
	// (for reflection, its first message) before it ends with
	// DEADLINE_EXCEEDED, so that streams whose body never comes are not
	// held. Default DefaultRequestReadTimeout; negative disables it.
	RequestReadTimeout time.Duration
	// MaxPendingPerUID bounds the calls of one peer UID waiting for their
	// request at once; more are refused RESOURCE_EXHAUSTED before anything
	// is read. Default DefaultMaxPendingPerUID; negative means no limit.
	MaxPendingPerUID int
	// MaxWatchersPerUID bounds the watches one peer UID may hold open at
	// once (RESOURCE_EXHAUSTED beyond it), so that one client cannot take
	// every watch slot. Default DefaultMaxWatchersPerUID; negative means
	// no share.
	MaxWatchersPerUID int
	// QPS and Burst set the rate limit shared by ListPods and GetPod.
	// Defaults DefaultQPS and DefaultBurst; a negative QPS disables the limit.
	QPS   float64
	Burst int
	// WatchQueue is how many live events a watcher may have queued before it
	// is dropped. Default service.DefaultWatchQueue.
	WatchQueue int
	// WatchProgressInterval is the interval between the progress marks of
	// the typed watches that ask for them (progress_notify). Default
	// service.DefaultProgressInterval.
	WatchProgressInterval time.Duration
	// MaxStreams is the number of concurrent HTTP/2 streams (calls, watches
	// included) per connection. Default DefaultMaxStreams.
	MaxStreams int
	// ShutdownTimeout bounds the graceful shutdown. Default
	// DefaultShutdownTimeout.
	ShutdownTimeout time.Duration

	// AllowedUIDs and AllowedGIDs are the peers (SO_PEERCRED) that may call
	// the Pods API and reflection: a peer whose UID is in AllowedUIDs, or
	// whose effective or supplementary group is in AllowedGIDs. Others get
	// PERMISSION_DENIED. Health stays open to every peer that can connect.
	// A nil AllowedUIDs means DefaultAllowedUIDs; AllowAnyPeer turns the
	// check off.
	AllowedUIDs  []uint32
	AllowedGIDs  []uint32
	AllowAnyPeer bool
	// SocketMode is the permission of the socket file; default 0600, or 0660
	// when SocketGroup is set. SocketGroup is a group name or number given
	// to the socket (and to its directory when the server creates it).
	SocketMode  fs.FileMode
	SocketGroup string
	// PerClientQPS and PerClientBurst set a rate limit of ListPods and
	// GetPod per peer UID, applied before the shared one. 0 (the default)
	// turns it off; PerClientBurst defaults to DefaultPerClientBurst.
	PerClientQPS   float64
	PerClientBurst int
	// RateLimitDelay is how long a call refused by either rate limit waits
	// before it is answered RESOURCE_EXHAUSTED (at most half of what is left
	// of its deadline, and for at most guard.DefaultTarpitCapacity calls
	// at once): a client that retries at once is slowed to one call per
	// delay and stream, so that a flood of refusals cannot take the CPUs
	// from the watchers. Default DefaultRateLimitDelay; negative answers at
	// once.
	RateLimitDelay time.Duration
	// MaxWatchers bounds the watches open at once (RESOURCE_EXHAUSTED beyond
	// it); MaxConnections bounds the open connections (more are closed as
	// soon as accepted). Defaults DefaultMaxWatchers and
	// DefaultMaxConnections; negative means no limit.
	MaxWatchers    int
	MaxConnections int
	// IdleTimeout closes a connection without open calls or watches after
	// that long. Default DefaultIdleTimeout; negative disables it.
	IdleTimeout time.Duration
	// KeepaliveInterval is how long a connection may stay silent before the
	// server pings it; a peer that does not answer within KeepaliveTimeout
	// is closed. Defaults DefaultKeepaliveInterval and
	// DefaultKeepaliveTimeout; a negative interval disables the pings.
	KeepaliveInterval time.Duration
	KeepaliveTimeout  time.Duration
	// WriteStallTimeout is how long a write to a client may stay blocked
	// (the client stopped reading) before its stream is reset, and before a
	// connection on which nothing can be written is closed. Default
	// DefaultWriteStallTimeout; negative disables it.
	WriteStallTimeout time.Duration
	// NoKubeletWire turns off the kubelet's own Pods API (v1alpha1.Pods, pods
	// as bytes), which is served by default beside the typed one on the same
	// socket, from the same store, guards and rate limit.
	NoKubeletWire bool
	// HostProc is the proc file system FindPods reads the cgroups of
	// processes from (keys pid and caller). Default podcgroup.DefaultProc.
	HostProc string
	// Hooks change the assembly for tests that plant faults in it. None by
	// default.
	Hooks Hooks
	// Logger receives the server's logs. Default slog.Default().
	Logger *slog.Logger
	// Registry receives the server's metrics. Default a new registry with the
	// Go and process collectors.
	Registry *prometheus.Registry
}

// Hooks change the assembly of New for the tests that plant faults in it:
// the conformance suite's self-test. A server that serves agents has none.
type Hooks struct {
	// Interceptors edits the interceptor chain of the Pods API, which it is
	// given outermost first and named: InterceptorMetrics, the names of
	// package guard (guard.NameAccess, ...), InterceptorFieldMasks.
	Interceptors func([]guard.Named) []guard.Named
	// Pods and Kubelet wrap the handlers of the typed and of the kubelet's
	// wire.
	Pods    func(podsv1alpha1connect.PodsHandler) podsv1alpha1connect.PodsHandler
	Kubelet func(v1alpha1connect.PodsHandler) v1alpha1connect.PodsHandler
}

// Store is the pod store the server serves: the service's PodReader, plus a
// way to learn when it has synced.
type Store interface {
	service.PodReader
	// SyncedC returns a channel that is closed when the store has synced.
	SyncedC() <-chan struct{}
}

// Server serves the Pods API of one Store.
type Server struct {
	cfg      Config
	store    Store
	listener net.Listener
	metrics  *connListener
	http     *http.Server
	mhttp    *http.Server
	health   *grpchealth.StaticChecker
	services []string            // the names of the Pods services served
	policy   *guard.AccessPolicy // nil: every peer may call
	shutdown chan struct{}
	stall    *stallGuard
}

// New listens on cfg.Socket (and cfg.MetricsAddress) and returns a Server
// ready to Serve st. The socket accepts connections when New returns.
//
// It is the one assembly of the server: podsapi-server, the tests and the
// conformance suite's self-test all serve through it (the self-test plants
// its faults with cfg.Hooks).
func New(st Store, cfg Config) (*Server, error) {
	cfg = withDefaults(cfg)
	s := &Server{cfg: cfg, store: st, shutdown: make(chan struct{})}
	socketOpts, err := s.socketOptions()
	if err != nil {
		return nil, err
	}
	s.http = s.httpServer(s.handler())
	l, err := socket.Listen(cfg.Socket, socketOpts...)
	if err != nil {
		return nil, err
	}
	cl := newConnListener(l, cfg.MaxConnections, true, apiConnMetrics, cfg.Registry, cfg.Logger)
	cl.limitDenied(s.policy, DefaultMaxDeniedConnections)
	cl.stall = s.stall
	s.listener = cl
	if cfg.MetricsAddress != "" {
		if s.metrics, s.mhttp, err = listenMetrics(cfg); err != nil {
			l.Close()
			return nil, err
		}
	}
	return s, nil
}

// socketOptions returns the permissions of the socket.
func (s *Server) socketOptions() ([]socket.Option, error) {
	opts := []socket.Option{socket.WithMode(s.cfg.SocketMode)}
	if s.cfg.SocketGroup != "" {
		gid, err := lookupGroup(s.cfg.SocketGroup)
		if err != nil {
			return nil, err
		}
		opts = append(opts, socket.WithGroup(gid))
	}
	return opts, nil
}

// guards returns the guards of the Pods API, registering their gauges. One
// set of guards serves both wires: one rate-limit bucket, one limit of open
// watches, one access policy.
func (s *Server) guards(access *guard.AccessGuard) guard.Guards {
	cfg := s.cfg
	g := guard.Guards{
		Access:  access,
		Ready:   s.store.Synced,
		Tarpit:  guard.NewTarpit(cfg.RateLimitDelay, guard.DefaultTarpitCapacity),
		Watches: guard.NewWatchLimit(cfg.MaxWatchers).PerUID(cfg.MaxWatchersPerUID),
	}
	if cfg.QPS >= 0 {
		g.Limiter = rate.NewLimiter(rate.Limit(cfg.QPS), cfg.Burst)
	}
	if cfg.PerClientQPS > 0 {
		g.PerClient = guard.NewPerClientLimiter(cfg.PerClientQPS, cfg.PerClientBurst)
	}
	cfg.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "podsapi_rate_limit_delayed",
		Help: "Number of calls refused by a rate limit and waiting --rate-limit-delay before their answer.",
	}, func() float64 { return float64(g.Tarpit.Waiting()) }))
	cfg.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "podsapi_watches_open",
		Help: "Number of WatchPods streams open (bounded by --max-watchers).",
	}, func() float64 { return float64(g.Watches.Open()) }))
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
// first, as Hooks.Interceptors leaves it.
func (s *Server) interceptors(metrics *service.Metrics, g guard.Guards) []connect.Interceptor {
	chain := []guard.Named{{Name: InterceptorMetrics, Interceptor: metrics}}
	chain = append(chain, guard.Chain(g)...)
	chain = append(chain, guard.Named{Name: InterceptorFieldMasks, Interceptor: service.FieldMasks()})
	if s.cfg.Hooks.Interceptors != nil {
		chain = s.cfg.Hooks.Interceptors(chain)
	}
	is := make([]connect.Interceptor, len(chain))
	for i, n := range chain {
		is[i] = n.Interceptor
	}
	return is
}

// handler returns the HTTP handler of the socket: both wires of the Pods
// API, health and reflection, behind the gate and the stall guard.
func (s *Server) handler() http.Handler {
	cfg := s.cfg
	metrics := service.NewMetrics(cfg.Registry)
	if enc, ok := s.store.(interface{ Encodes() uint64 }); ok {
		cfg.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "podsapi_pod_encodes_total",
			Help: "Number of pod versions encoded by the store: each is encoded once, whatever the number of requests and watchers.",
		}, func() float64 { return float64(enc.Encodes()) }))
	}
	if h, ok := s.store.(interface{ HistoryLen() (int, int64) }); ok {
		cfg.Registry.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "podsapi_watch_history_events",
				Help: "Number of changes the store keeps for watches that resume (bounded by --watch-history).",
			}, func() float64 { n, _ := h.HistoryLen(); return float64(n) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "podsapi_watch_history_bytes",
				Help: "Bytes counted against --watch-history-bytes by the changes the store keeps: their pods' encodings plus 512 bytes each.",
			}, func() float64 { _, b := h.HistoryLen(); return float64(b) }),
		)
	}
	if d, ok := s.store.(interface{ DeletedLen() (int, int64) }); ok {
		registerDeleted(cfg.Registry, d.DeletedLen)
	}
	var access *guard.AccessGuard
	if !cfg.AllowAnyPeer {
		s.policy = &guard.AccessPolicy{UIDs: cfg.AllowedUIDs, GIDs: cfg.AllowedGIDs}
		access = guard.NewAccessGuard(s.policy, cfg.Registry, cfg.Logger)
	}
	opts := service.HandlerOptions(s.interceptors(metrics, s.guards(access))...)
	handlers := service.NewHandlers(s.store,
		service.WithWatchQueue(cfg.WatchQueue),
		service.WithProgressInterval(cfg.WatchProgressInterval),
		service.WithMetrics(metrics),
		service.WithShutdown(s.shutdown),
		service.WithLogger(cfg.Logger),
		service.WithProcesses(podcgroup.NewReader(cfg.HostProc)),
		service.WithCaller(callerPID),
	)
	pods, kubelet := handlers.Pods, handlers.Kubelet
	if cfg.Hooks.Pods != nil {
		pods = cfg.Hooks.Pods(pods)
	}
	if cfg.Hooks.Kubelet != nil {
		kubelet = cfg.Hooks.Kubelet(kubelet)
	}

	mux := http.NewServeMux()
	s.services = []string{podsv1alpha1connect.PodsName}
	mux.Handle(podsv1alpha1connect.NewPodsHandler(pods, opts...))
	if !cfg.NoKubeletWire {
		s.services = append(s.services, v1alpha1connect.PodsName)
		mux.Handle(v1alpha1connect.NewPodsHandler(kubelet, opts...))
	}
	s.health = grpchealth.NewStaticChecker(s.services...)
	s.setHealth(grpchealth.StatusNotServing)
	// Health stays open to any peer that can connect, for liveness probes:
	// it tells nothing but whether the server serves. Reflection is guarded
	// like the API. Their requests are as small as the API's; connect
	// applies the cap to the inflated size of a compressed request.
	limit := connect.WithReadMaxBytes(service.MaxRequestBytes)
	mux.Handle(grpchealth.NewHandler(s.health, limit))
	reflector := grpcreflect.NewStaticReflector(append(s.services, grpchealth.HealthV1ServiceName)...)
	reflectionGuard := connect.WithHandlerOptions()
	if access != nil {
		reflectionGuard = connect.WithInterceptors(access)
	}
	mux.Handle(grpcreflect.NewHandlerV1(reflector, reflectionGuard, limit))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector, reflectionGuard, limit))

	// The transport wrappers, innermost first: watch flushes batched, the
	// gate (peer check and request deadline before any body is read), the
	// stall guard.
	var handler http.Handler = newGate(batchWatchFlushes(mux), access, cfg.RequestReadTimeout, cfg.MaxPendingPerUID, cfg.Registry)
	if cfg.WriteStallTimeout > 0 {
		s.stall = newStallGuard(cfg.WriteStallTimeout, cfg.Registry, cfg.Logger)
		handler = s.stall.wrap(handler)
	}
	return handler
}

// httpServer returns the HTTP/1.1 and h2c server of handler.
func (s *Server) httpServer(handler http.Handler) *http.Server {
	cfg := s.cfg
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Server{
		Handler:           handler,
		Protocols:         protocols,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		IdleTimeout:       max(cfg.IdleTimeout, 0),
		ConnContext:       connContext,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams:      cfg.MaxStreams,
			MaxDecoderHeaderTableSize: 16 << 10,
			// The windows and frames a client may send are sized for
			// requests of at most service.MaxRequestBytes, not
			// net/http's 1 MiB defaults: a connection buffers at most
			// 64 KiB that no handler has read yet.
			MaxReceiveBufferPerConnection: receiveWindowPerConnection,
			MaxReceiveBufferPerStream:     receiveWindowPerStream,
			MaxReadFrameSize:              maxReadFrameSize,
			SendPingTimeout:               max(cfg.KeepaliveInterval, 0),
			PingTimeout:                   cfg.KeepaliveTimeout,
			// No WriteByteTimeout: it arms a timer around every write to
			// the socket; the stall guard closes a connection whose
			// writes stay blocked (newStallGuard).
		},
		ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
	}
}

// The HTTP/2 settings the server advertises for what clients send: the
// protocol's initial windows (RFC 9113, 6.9.2) and its smallest largest
// frame (4.2). A stream's window is not set below the initial one: a client
// may send up to the initial window before it has read the server's
// SETTINGS, and net/http would reset its stream with FLOW_CONTROL_ERROR.
const (
	receiveWindowPerConnection = 65535
	receiveWindowPerStream     = 65535
	maxReadFrameSize           = 16 << 10
)

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
	if cfg.AllowedUIDs == nil {
		cfg.AllowedUIDs = DefaultAllowedUIDs()
	}
	if cfg.SocketMode == 0 {
		cfg.SocketMode = socket.Mode
		if cfg.SocketGroup != "" {
			cfg.SocketMode = 0o660
		}
	}
	if cfg.PerClientBurst == 0 {
		cfg.PerClientBurst = DefaultPerClientBurst
	}
	if cfg.MaxWatchers == 0 {
		cfg.MaxWatchers = DefaultMaxWatchers
	}
	if cfg.MaxWatchersPerUID == 0 {
		cfg.MaxWatchersPerUID = DefaultMaxWatchersPerUID
	}
	if cfg.MetricsTimeout == 0 {
		cfg.MetricsTimeout = DefaultMetricsTimeout
	}
	if cfg.MetricsMaxConnections == 0 {
		cfg.MetricsMaxConnections = DefaultMetricsMaxConnections
	}
	if cfg.MaxPendingPerUID == 0 {
		cfg.MaxPendingPerUID = DefaultMaxPendingPerUID
	}
	if cfg.RequestReadTimeout == 0 {
		cfg.RequestReadTimeout = DefaultRequestReadTimeout
	}
	if cfg.MaxConnections == 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.KeepaliveInterval == 0 {
		cfg.KeepaliveInterval = DefaultKeepaliveInterval
	}
	if cfg.KeepaliveTimeout == 0 {
		cfg.KeepaliveTimeout = DefaultKeepaliveTimeout
	}
	if cfg.RateLimitDelay == 0 {
		cfg.RateLimitDelay = DefaultRateLimitDelay
	}
	if cfg.WriteStallTimeout == 0 {
		cfg.WriteStallTimeout = DefaultWriteStallTimeout
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
	if path, ok := strings.CutPrefix(s.cfg.MetricsAddress, unixPrefix); ok {
		// The listener's address is the name the socket was created under.
		return &net.UnixAddr{Name: path, Net: "unix"}
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
	stopReaper := make(chan struct{})
	if s.stall != nil {
		wg.Go(func() { s.stall.run(stopReaper) })
	}
	wg.Go(func() {
		select {
		case <-s.store.SyncedC():
			log.Info("pod sources synced: serving")
			s.setHealth(grpchealth.StatusServing)
		case <-s.shutdown:
		}
	})

	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	log.Info("shutting down", "timeout", s.cfg.ShutdownTimeout)
	s.setHealth(grpchealth.StatusNotServing)
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
	close(stopReaper)
	wg.Wait()
	return err
}

// setHealth sets the health of the server and of each service it serves.
func (s *Server) setHealth(status grpchealth.Status) {
	s.health.SetStatus("", status)
	for _, name := range s.services {
		s.health.SetStatus(name, status)
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
