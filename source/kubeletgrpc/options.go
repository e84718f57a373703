package kubeletgrpc

import (
	"log/slog"
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
	// DefaultReadMaxBytes is the largest WatchPods event accepted.
	DefaultReadMaxBytes = 256 << 20
	// DefaultPingInterval is how long a connection may be silent before
	// the Source pings the kubelet; a ping unanswered for as long ends it.
	DefaultPingInterval = 30 * time.Second
)

// Option configures a Source made by New.
type Option func(*options)

type options struct {
	source.Options
	socket       string
	readMaxBytes int
	ping         time.Duration
	snapshot     snapshotBounds
}

func defaultOptions() options {
	return options{
		Options:      source.Options{Logger: slog.Default(), MinBackoff: DefaultMinBackoff, MaxBackoff: DefaultMaxBackoff},
		socket:       DefaultSocket,
		readMaxBytes: DefaultReadMaxBytes,
		ping:         DefaultPingInterval,
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

// WithReadMaxBytes sets the size of the largest WatchPods event the Source
// accepts. The default is DefaultReadMaxBytes (256 MiB). Non-positive values
// keep the default.
func WithReadMaxBytes(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.readMaxBytes = n
		}
	}
}

// WithPingInterval sets how long the connection to the kubelet may be
// silent before the Source sends an HTTP/2 ping; when the ping is not
// answered within as long, the connection is closed and the Source
// reconnects. The default is DefaultPingInterval. Non-positive values keep
// the default.
func WithPingInterval(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.ping = d
		}
	}
}
