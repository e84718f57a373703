package server

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/podsapi/podsapi/budget"
	"github.com/podsapi/podsapi/guard"
	"github.com/podsapi/podsapi/internal/hooks"
	"github.com/podsapi/podsapi/podcgroup"
	"github.com/podsapi/podsapi/service"
	"github.com/podsapi/podsapi/socket"
	"github.com/podsapi/podsapi/store"
)

// Config configures a Server, in groups: who may call (Access), how much
// (Limits), the watches (Watch), the connections' timeouts (Transport), the
// metrics endpoint (Metrics), and the store the server is given (Store,
// which builds it: Store.Options). Zero values take the defaults documented
// beside each group. AddFlags binds every setting to its flag, and Validate
// says everything that is wrong with a Config at once.
type Config struct {
	// Socket is the path of the UNIX socket. Default socket.DefaultPath.
	Socket string
	// NoKubeletWire turns off the kubelet's own Pods API (v1alpha1.Pods, pods
	// as bytes), which is served by default beside the typed one on the same
	// socket, from the same store, guards and rate limit.
	NoKubeletWire bool
	// HostProc is the proc file system FindPods reads the cgroups of
	// processes from (keys pid and caller). Default podcgroup.DefaultProc.
	HostProc string
	// NRISocket is the container runtime's NRI socket: when set, the server
	// observes the runtime there (package nri) and FindPods finds
	// containers from the runtime's events, before the pod source reports
	// them. Default "": no NRI, FindPods answers from the pod source only.
	NRISocket string

	Access    AccessConfig
	Limits    LimitsConfig
	Watch     WatchConfig
	Transport TransportConfig
	Metrics   MetricsConfig
	Store     StoreConfig

	// Workloads answers the workload of FindPods' matches
	// (PodMatch.workload). Default nil: none is answered.
	Workloads service.Workloads

	// Logger receives the server's logs. Default slog.Default().
	Logger *slog.Logger
	// Registry receives the server's metrics. Default a new registry with the
	// Go and process collectors.
	Registry *prometheus.Registry
	// Hooks change the assembly for the module's own tests (package
	// internal/hooks). Nil for a server that serves agents.
	Hooks *hooks.Hooks
}

// NewRegistry returns a registry with the Go and process collectors, where
// a server registers its metrics: Config.Registry's default, and the one
// podsapi-server also gives its pod source.
func NewRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// StoreConfig are the settings of the store that a Server is given, which
// Options builds it with; Validate checks them with the rest. 0 means the
// store's default, a negative value keeps none (or, for MaxPodBytes, takes
// any size; for MemoryBudgetBytes, counts nothing).
type StoreConfig struct {
	// HistoryEvents and HistoryBytes bound the changes kept for watches
	// that resume. Defaults store.DefaultHistory and
	// store.DefaultHistoryBytes.
	HistoryEvents int
	HistoryBytes  int64
	// MaxPodBytes bounds the encoding of one pod taken from the source.
	// Default store.DefaultMaxPodBytes.
	MaxPodBytes int
	// DeletedRetention, MaxDeletedPods and MaxDeletedPodsBytes bound the
	// deleted pods kept findable by FindPods with include_deleted. Defaults
	// store.DefaultDeletedRetention, store.DefaultDeletedPods and
	// store.DefaultDeletedPodsBytes.
	DeletedRetention    time.Duration
	MaxDeletedPods      int
	MaxDeletedPodsBytes int64
	// MemoryBudgetBytes bounds what the server keeps on behalf of its
	// clients (budget.ForSetting). Default half the memory limit, 512 MiB
	// without one.
	MemoryBudgetBytes int64
}

// Options returns the options a store is built with for c.
func (c StoreConfig) Options() []store.Option {
	return []store.Option{
		store.WithHistory(c.HistoryEvents, c.HistoryBytes),
		store.WithMaxPodBytes(c.MaxPodBytes),
		store.WithDeletedPods(c.DeletedRetention, c.MaxDeletedPods, c.MaxDeletedPodsBytes),
		store.WithBudget(budget.ForSetting(c.MemoryBudgetBytes)),
	}
}

// MinProgressInterval is the shortest Watch.ProgressInterval: progress
// marks are for watchers to learn that they are up to date, and a mark
// every millisecond for each of thousands of watchers is a flood.
const MinProgressInterval = time.Second

// Validate returns every error of c at once, each naming its flag, or nil:
// a negative value where a negative turns nothing off (0 means the
// default), a socket path longer than the kernel takes, and a progress
// interval below MinProgressInterval. podsapi-server checks its command
// line with it, and New checks its Config.
func (c Config) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"burst", float64(c.Limits.Burst)}, {"watch-queue", float64(c.Watch.Queue)}, {"max-streams", float64(c.Limits.MaxStreams)},
		{"per-client-burst", float64(c.Limits.PerClientBurst)},
		{"metrics-max-connections", float64(c.Metrics.MaxConnections)}, {"shutdown-timeout", float64(c.Transport.ShutdownTimeout)},
		{"keepalive-timeout", float64(c.Transport.KeepaliveTimeout)}, {"metrics-timeout", float64(c.Metrics.Timeout)},
		{"watch-progress-interval", float64(c.Watch.ProgressInterval)},
	} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("--%s must not be negative (0 means the default)", f.name))
		}
	}
	if len(c.Socket) > socket.MaxPathLen {
		errs = append(errs, fmt.Errorf("--socket %s is %d bytes: %w", c.Socket, len(c.Socket), socket.ErrPathTooLong))
	}
	if pi := c.Watch.ProgressInterval; pi > 0 && pi < MinProgressInterval {
		errs = append(errs, fmt.Errorf("--watch-progress-interval %v is below its minimum, %v (0 means the default, %v)", pi, MinProgressInterval, service.DefaultProgressInterval))
	}
	return errors.Join(errs...)
}

// withDefaults fills the zero fields of cfg, group by group.
func (cfg Config) withDefaults() Config {
	if cfg.Socket == "" {
		cfg.Socket = socket.DefaultPath
	}
	if cfg.HostProc == "" {
		cfg.HostProc = podcgroup.DefaultProc
	}
	cfg.Access = cfg.Access.withDefaults()
	cfg.Limits = cfg.Limits.withDefaults()
	cfg.Watch = cfg.Watch.withDefaults()
	cfg.Transport = cfg.Transport.withDefaults()
	cfg.Metrics = cfg.Metrics.withDefaults()
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registry == nil {
		cfg.Registry = NewRegistry()
	}
	if cfg.Hooks == nil {
		cfg.Hooks = &hooks.Hooks{}
	}
	return cfg
}

// AccessConfig says who may call, and who may open the socket.
type AccessConfig struct {
	// AllowedUIDs and AllowedGIDs are the peers (SO_PEERCRED) that may call
	// the Pods API and reflection: a peer whose UID is in AllowedUIDs, or
	// whose effective or supplementary group is in AllowedGIDs. Others get
	// PERMISSION_DENIED, and may keep DefaultMaxDeniedConnections
	// connections open. Health stays open to every peer that can connect.
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
}

// DefaultMaxDeniedConnections is how many connections a peer UID that
// AccessConfig denies may keep open: it may only call health.
const DefaultMaxDeniedConnections = 8

// DefaultAllowedUIDs returns the UIDs allowed by default: root and the
// server's own user (the same when the server runs as root).
func DefaultAllowedUIDs() []uint32 {
	uids := []uint32{0}
	if euid := os.Geteuid(); euid > 0 {
		uids = append(uids, uint32(euid))
	}
	return uids
}

func (a AccessConfig) withDefaults() AccessConfig {
	if a.AllowedUIDs == nil {
		a.AllowedUIDs = DefaultAllowedUIDs()
	}
	if a.SocketMode == 0 {
		a.SocketMode = socket.Mode
		if a.SocketGroup != "" {
			a.SocketMode = 0o660
		}
	}
	return a
}

// Policy returns the peers that a allows, as guard.AccessPolicy: the gRPC
// socket's, which the Kubernetes API's socket shares (door.Env.Peers).
func (a AccessConfig) Policy() *guard.AccessPolicy {
	a = a.withDefaults()
	return &guard.AccessPolicy{AnyPeer: a.AllowAnyPeer, UIDs: a.AllowedUIDs, GIDs: a.AllowedGIDs}
}

// LimitsConfig bounds how much the clients may ask.
type LimitsConfig struct {
	// QPS and Burst set the rate limit shared by ListPods and GetPod.
	// Defaults DefaultQPS and DefaultBurst; a negative QPS disables the
	// limit.
	QPS   float64
	Burst int
	// PerClientQPS and PerClientBurst set a rate limit of ListPods and
	// GetPod per client (guard.Peer.Client: its pod, systemd unit, or else
	// its UID), applied before the shared one; PerClientBurst defaults to
	// DefaultPerClientBurst. 0 (the default) gives each client a fair share
	// of the shared limit instead (guard.NewFairShareLimiter): while n
	// clients call, each may take QPS/n and Burst/n, and a client alone
	// has the whole shared limit; negative turns the per-client limit off.
	PerClientQPS   float64
	PerClientBurst int
	// RateLimitDelay is how long a call refused by either rate limit (or a
	// watch refused before its first message) waits before it is answered (at most half of what is left
	// of its deadline, and for at most guard.DefaultTarpitCapacity calls
	// at once): a client that retries at once is slowed to one call per
	// delay and stream, so that a flood of refusals cannot take the CPUs
	// from the watchers. Default DefaultRateLimitDelay; negative answers at
	// once.
	RateLimitDelay time.Duration
	// MaxWatchers bounds the watches open at once (RESOURCE_EXHAUSTED
	// beyond it), MaxWatchersPerClient those of one client (its pod, systemd
	// unit, or else its UID: guard.Peer.Client), so that one
	// client cannot take every watch slot; a client's share is at most half
	// of MaxWatchers (internal/admit.Slots). Defaults DefaultMaxWatchers and
	// DefaultMaxWatchersPerClient; negative means no limit (as 0 does on
	// the command line).
	MaxWatchers          int
	MaxWatchersPerClient int
	// MaxConnections bounds the open connections (more are closed as soon
	// as accepted); MaxStreams is the number of concurrent HTTP/2 streams
	// (calls, watches included) per connection. Defaults
	// DefaultMaxConnections and DefaultMaxStreams; a negative
	// MaxConnections means no limit (as 0 does on the command line).
	MaxConnections int
	MaxStreams     int
	// MaxPendingPerClient bounds the calls of one client (as above) waiting for their
	// request at once; more are refused RESOURCE_EXHAUSTED before anything
	// is read. Default DefaultMaxPendingPerClient; negative means no limit
	// (as 0 does on the command line).
	MaxPendingPerClient int
	// MaxFindWait caps the wait a FindPods request may ask for (its
	// wait); MaxFindWaiters bounds the FindPods calls waiting at once, and
	// MaxFindWaitersPerClient those of one client (as above), beyond which
	// they fail RESOURCE_EXHAUSTED. Defaults service.DefaultMaxFindWait,
	// service.DefaultMaxFindWaiters and
	// service.DefaultMaxFindWaitersPerClient; a negative MaxFindWait turns
	// waiting off (every FindPods answers at once), a negative bound means
	// no limit (as 0 does on the command line), and a client's share is at
	// most half of MaxFindWaiters.
	MaxFindWait             time.Duration
	MaxFindWaiters          int
	MaxFindWaitersPerClient int
}

// Defaults of LimitsConfig.
const (
	DefaultQPS   = 100
	DefaultBurst = 10
	// DefaultPerClientBurst is the burst of each client's bucket when
	// PerClientQPS is set without PerClientBurst.
	DefaultPerClientBurst = 5
	// DefaultRateLimitDelay is how long a call refused by a rate limit
	// waits before it is answered.
	DefaultRateLimitDelay       = 100 * time.Millisecond
	DefaultMaxWatchers          = 10000
	DefaultMaxWatchersPerClient = 1000
	// DefaultMaxStreams and DefaultMaxConnections bound the streams that
	// can be open at once, 25,600: every stream costs net/http a goroutine
	// before any handler runs, and a root client holding that many fits the
	// DaemonSet's 256 MiB (142 MiB peak measured; 100 × 1,000 was
	// OOM-killed under 256 MiB with the former 1,000 streams per
	// connection).
	DefaultMaxStreams     = 100
	DefaultMaxConnections = 256
	// DefaultMaxPendingPerClient is how many calls of one client may wait
	// for their request at once.
	DefaultMaxPendingPerClient = 256
)

func (l LimitsConfig) withDefaults() LimitsConfig {
	l.QPS = orDefault(l.QPS, DefaultQPS)
	l.Burst = orDefault(l.Burst, DefaultBurst)
	l.PerClientBurst = orDefault(l.PerClientBurst, DefaultPerClientBurst)
	l.RateLimitDelay = orDefault(l.RateLimitDelay, DefaultRateLimitDelay)
	l.MaxWatchers = orDefault(l.MaxWatchers, DefaultMaxWatchers)
	l.MaxWatchersPerClient = orDefault(l.MaxWatchersPerClient, DefaultMaxWatchersPerClient)
	l.MaxConnections = orDefault(l.MaxConnections, DefaultMaxConnections)
	l.MaxStreams = orDefault(l.MaxStreams, DefaultMaxStreams)
	l.MaxPendingPerClient = orDefault(l.MaxPendingPerClient, DefaultMaxPendingPerClient)
	l.MaxFindWait = orDefault(l.MaxFindWait, service.DefaultMaxFindWait)
	l.MaxFindWaiters = orDefault(l.MaxFindWaiters, service.DefaultMaxFindWaiters)
	l.MaxFindWaitersPerClient = orDefault(l.MaxFindWaitersPerClient, service.DefaultMaxFindWaitersPerClient)
	return l
}

// WatchConfig configures the watches.
type WatchConfig struct {
	// Queue is how many live events a watcher may have queued before it
	// is dropped. Default service.DefaultWatchQueue.
	Queue int
	// ProgressInterval is the interval between the progress marks of the
	// typed watches that ask for them (progress_notify). Default
	// service.DefaultProgressInterval.
	ProgressInterval time.Duration
}

func (w WatchConfig) withDefaults() WatchConfig {
	w.Queue = orDefault(w.Queue, service.DefaultWatchQueue)
	w.ProgressInterval = orDefault(w.ProgressInterval, service.DefaultProgressInterval)
	return w
}

// TransportConfig sets the timeouts of the connections and calls.
type TransportConfig struct {
	// RequestReadTimeout is how long a call may take to send its request
	// (for reflection, its first message) before it ends with
	// DEADLINE_EXCEEDED, so that streams whose body never comes are not
	// held. Default DefaultRequestReadTimeout; negative disables it.
	RequestReadTimeout time.Duration
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
	// ShutdownTimeout bounds the graceful shutdown. Default
	// DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
}

// Defaults of TransportConfig.
const (
	DefaultRequestReadTimeout = 10 * time.Second
	DefaultIdleTimeout        = 5 * time.Minute
	DefaultKeepaliveInterval  = time.Minute
	DefaultKeepaliveTimeout   = 20 * time.Second
	DefaultWriteStallTimeout  = 30 * time.Second
	DefaultShutdownTimeout    = 10 * time.Second
)

func (t TransportConfig) withDefaults() TransportConfig {
	t.RequestReadTimeout = orDefault(t.RequestReadTimeout, DefaultRequestReadTimeout)
	t.IdleTimeout = orDefault(t.IdleTimeout, DefaultIdleTimeout)
	t.KeepaliveInterval = orDefault(t.KeepaliveInterval, DefaultKeepaliveInterval)
	t.KeepaliveTimeout = orDefault(t.KeepaliveTimeout, DefaultKeepaliveTimeout)
	t.WriteStallTimeout = orDefault(t.WriteStallTimeout, DefaultWriteStallTimeout)
	t.ShutdownTimeout = orDefault(t.ShutdownTimeout, DefaultShutdownTimeout)
	return t
}

// MetricsConfig configures the metrics endpoint.
type MetricsConfig struct {
	// Address is the TCP address of the /metrics endpoint, or "unix:"
	// followed by the path of a UNIX socket (created 0600); empty serves no
	// metrics endpoint (metrics are still kept in Config.Registry).
	// podsapi-server's default is DefaultMetricsAddress.
	Address string
	// Timeout bounds the reading of a scrape request and the writing of its
	// answer, and closes metrics connections idle that long.
	// MaxConnections bounds the metrics connections open at once: a new one
	// takes the slot of the oldest idle one, or is closed. Defaults
	// DefaultMetricsTimeout and DefaultMetricsMaxConnections.
	Timeout        time.Duration
	MaxConnections int
}

// Defaults of MetricsConfig.
const (
	DefaultMetricsAddress        = "127.0.0.1:10265"
	DefaultMetricsTimeout        = 10 * time.Second
	DefaultMetricsMaxConnections = 16
)

func (m MetricsConfig) withDefaults() MetricsConfig {
	m.Timeout = orDefault(m.Timeout, DefaultMetricsTimeout)
	m.MaxConnections = orDefault(m.MaxConnections, DefaultMetricsMaxConnections)
	return m
}

// orDefault returns v, or def when v is zero.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
