package apiserver

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/source"
)

// The defaults of the options.
const (
	// DefaultQPS is the sustained rate of requests the Source may send the
	// API server. A watch that runs normally sends one request every five
	// to ten minutes (the reflector's watch timeout); the limit matters
	// only when the Source relists after errors.
	DefaultQPS = 5
	// DefaultBurst is the number of requests the Source may send at once
	// above DefaultQPS.
	DefaultBurst = 10
	// DefaultMaxResponseBytes is the size of the largest answer to a
	// request other than a watch (a list, when the server does not
	// stream it). Each event of a watch, including the streamed initial
	// list, is bounded by client-go's decoder to 16 MiB.
	DefaultMaxResponseBytes = 64 << 20
	// DefaultDialTimeout bounds opening a connection to the API server.
	DefaultDialTimeout = 10 * time.Second
)

// The defaults of WithBackoff, those of client-go's reflector.
const (
	// DefaultMinBackoff is the first wait before a list or watch is
	// retried.
	DefaultMinBackoff = 800 * time.Millisecond
	// DefaultMaxBackoff is the longest wait before a list or watch is
	// retried.
	DefaultMaxBackoff = 30 * time.Second
)

// Option configures a Source made by New.
type Option func(*options)

type options struct {
	source.Options
	kubeconfig  string
	qps         float32
	burst       int
	maxResponse int64
	dialTimeout time.Duration
}

func defaultOptions() options {
	return options{
		Options:     source.Options{Logger: slog.Default(), MinBackoff: DefaultMinBackoff, MaxBackoff: DefaultMaxBackoff},
		qps:         DefaultQPS,
		burst:       DefaultBurst,
		maxResponse: DefaultMaxResponseBytes,
		dialTimeout: DefaultDialTimeout,
	}
}

// WithKubeconfig sets the kubeconfig file that says where the API server is
// and how to authenticate to it; its current context is used. The default,
// an empty path, is the in-cluster configuration: the service account of
// the pod the Source runs in.
func WithKubeconfig(path string) Option {
	return func(o *options) { o.kubeconfig = path }
}

// WithLogger sets the logger of the Source. The default is slog.Default()
// at the time New is called. A nil logger keeps the default. Every record
// carries the attribute source=Name(). client-go's own logs (those of the
// reflector) go to the same logger at debug level.
func WithLogger(logger *slog.Logger) Option {
	return func(o *options) { o.SetLogger(logger) }
}

// WithRegisterer registers the metrics of the Source,
// podsapi_source_errors_total, podsapi_source_last_success_timestamp_seconds,
// podsapi_source_connected and podsapi_source_relists_total, with reg. The
// default is to register no metrics. Sources of every kind may share one
// registerer: they then share the metrics, told apart by their source
// label.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(o *options) { o.Registerer = reg }
}

// WithRateLimit sets the client's rate limit on requests to the API server:
// qps per second sustained, burst at once. The defaults are DefaultQPS and
// DefaultBurst. Non-positive values keep the defaults.
func WithRateLimit(qps float32, burst int) Option {
	return func(o *options) {
		if qps > 0 {
			o.qps = qps
		}
		if burst > 0 {
			o.burst = burst
		}
	}
}

// WithMaxResponseBytes sets the size of the largest answer the Source reads
// to a request other than a watch. The default is DefaultMaxResponseBytes.
// Non-positive values keep the default.
func WithMaxResponseBytes(n int64) Option {
	return func(o *options) {
		if n > 0 {
			o.maxResponse = n
		}
	}
}

// WithBackoff sets the first and the longest wait before the reflector
// retries a list or a watch that failed. Each failure doubles the wait up to
// maxWait, with up to half of it again added at random (jitter); two minutes
// without a failure reset it. The defaults are DefaultMinBackoff and
// DefaultMaxBackoff. Non-positive values keep the defaults; maxWait is
// raised to minWait if smaller.
func WithBackoff(minWait, maxWait time.Duration) Option {
	return func(o *options) { o.SetBackoff(minWait, maxWait) }
}
