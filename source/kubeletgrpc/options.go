package kubeletgrpc

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/source"
)

// DefaultSocket is the socket of the kubelet's Pods API when WithSocket is
// not given.
const DefaultSocket = "/var/lib/kubelet/pods-api/pods-api.sock"

// The defaults of the options.
const (
	// DefaultMinBackoff is the first wait before reconnecting.
	DefaultMinBackoff = 500 * time.Millisecond
	// DefaultMaxBackoff is the longest wait before reconnecting.
	DefaultMaxBackoff = 30 * time.Second
	// EventSlack is what a WatchPods event may take beside its pod: the
	// event's type and framing, with a wide margin.
	EventSlack = 64 << 10
	// DefaultReadMaxBytes is the largest WatchPods event accepted: the
	// largest pod the store takes by default (1.5 MiB, the API server's
	// object limit, as store.DefaultMaxPodBytes: a source does not import
	// the store) plus EventSlack. A larger event carries a pod the store
	// would refuse anyway; it ends the stream before it is read whole.
	DefaultReadMaxBytes = 3<<19 + EventSlack
	// AnyPodReadMaxBytes is the largest WatchPods event accepted when the
	// store takes pods of any size (WithMaxPodBytes of a negative value).
	AnyPodReadMaxBytes = 256 << 20
	// MinPingInterval is the shortest interval between pings that a
	// grpc-go server permits by default (keepalive.EnforcementPolicy
	// MinTime, 5 minutes, while a stream is open): a client that pings
	// more often is sent GOAWAY ENHANCE_YOUR_CALM "too_many_pings" after
	// its third early ping. A kubelet's Pods API server keeps that
	// default (pkg/kubelet/server/server.go ListenAndServePodsServer).
	MinPingInterval = 5 * time.Minute
	// DefaultPingInterval is how long a connection may be silent before
	// the Source pings the kubelet: MinPingInterval with a minute of margin
	// for the scheduling of both ends. On a UNIX socket a kubelet that
	// exits closes the connection at once; the ping finds one that hangs.
	DefaultPingInterval = MinPingInterval + time.Minute
	// DefaultResyncInterval is how often the Source lists the kubelet's
	// pods to find the changes its watch does not report: one ListPods,
	// one token of the kubelet's rate limit (100 qps, shared by every
	// client), every 10 s.
	DefaultResyncInterval = 10 * time.Second
	// PingTimeout is how long the Source waits for the answer to a ping
	// before it closes the connection and reconnects.
	PingTimeout = 30 * time.Second
)

// Option configures a Source made by New.
type Option func(*options)

type options struct {
	source.Options
	socket       string
	readMaxBytes int
	ping         time.Duration
	resync       time.Duration
	snapshot     snapshotBounds
	dial         func(ctx context.Context) (net.Conn, error) // tests only
}

func defaultOptions() options {
	return options{
		Options:      source.Options{Logger: slog.Default(), MinBackoff: DefaultMinBackoff, MaxBackoff: DefaultMaxBackoff},
		socket:       DefaultSocket,
		readMaxBytes: DefaultReadMaxBytes,
		ping:         DefaultPingInterval,
		resync:       DefaultResyncInterval,
	}
}

// WithSocket sets the kubelet's Pods API socket, a path or a unix:// URL.
// The default is DefaultSocket.
func WithSocket(path string) Option {
	return func(o *options) { o.socket = path }
}

// WithLogger sets the logger of the Source. The default is slog.Default()
// at the time New is called. A nil logger keeps the default. Every record
// carries the attribute source=Name().
func WithLogger(logger *slog.Logger) Option {
	return func(o *options) { o.SetLogger(logger) }
}

// WithRegisterer registers the metrics of the Source,
// podsapi_source_errors_total and
// podsapi_source_last_success_timestamp_seconds, with reg. The default is
// to register no metrics. Sources of every kind may share one registerer:
// they then share the metrics, told apart by their source label.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(o *options) { o.Registerer = reg }
}

// WithBackoff sets the first and the longest wait before reconnecting after
// the stream ended or could not be opened. Each failure doubles the wait up
// to maxWait, with up to half of it randomly taken off (jitter); a stream
// that delivered its initial snapshot resets it. The defaults are
// DefaultMinBackoff and DefaultMaxBackoff. Non-positive values keep the
// defaults; maxWait is raised to minWait if smaller.
func WithBackoff(minWait, maxWait time.Duration) Option {
	return func(o *options) { o.SetBackoff(minWait, maxWait) }
}

// WithMaxPodBytes bounds the WatchPods events the Source accepts to a pod
// of n bytes plus EventSlack: give it the bound of the store it feeds
// (store.WithMaxPodBytes), so that a pod the store refuses is not read
// whole first. A negative n takes pods of any size (events up to
// AnyPodReadMaxBytes); 0 keeps the default, DefaultReadMaxBytes.
func WithMaxPodBytes(n int) Option {
	return func(o *options) {
		switch {
		case n > 0:
			o.readMaxBytes = n + EventSlack
		case n < 0:
			o.readMaxBytes = AnyPodReadMaxBytes
		}
	}
}

// WithReadMaxBytes sets the size of the largest WatchPods event the Source
// accepts. The default is DefaultReadMaxBytes (the store's default bound of
// a pod plus EventSlack). Non-positive values keep the default. A resync's
// ListPods is bounded like a snapshot instead (WithSnapshotBounds).
func WithReadMaxBytes(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.readMaxBytes = n
		}
	}
}

// WithPingInterval sets how long the connection to the kubelet may be
// silent before the Source sends an HTTP/2 ping; when the ping is not
// answered within PingTimeout, the connection is closed and the Source
// reconnects. The default is DefaultPingInterval. Non-positive values keep
// the default, and values below MinPingInterval are raised to it: a
// kubelet would close a connection that pings more often.
func WithPingInterval(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.ping = max(d, MinPingInterval)
		}
	}
}

// WithResyncInterval sets how often the Source lists the kubelet's pods
// (ListPods) and reconciles them with what it has. A kubelet's WatchPods
// reports only changes of a pod's status: an edit of a static pod that
// keeps its UID (labels, annotations, arguments) is in its ListPods at once
// and never on its watch, and a replaced static pod (a new UID) reaches the
// watch 10-15 s after ListPods shows it. The resync turns them into
// changes within the interval. Each resync costs one token of the
// kubelet's rate limit; one that the limit refuses doubles the wait before
// the next, up to 8 times the interval. The default is
// DefaultResyncInterval; zero keeps it, and a negative interval turns the
// resync off.
func WithResyncInterval(d time.Duration) Option {
	return func(o *options) {
		if d != 0 {
			o.resync = d
		}
	}
}
