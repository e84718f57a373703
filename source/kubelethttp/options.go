package kubelethttp

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/source"
)

// The defaults of the options.
const (
	// DefaultURL is the kubelet's authenticated /pods endpoint on the node.
	DefaultURL = "https://127.0.0.1:10250/pods"
	// DefaultInterval is the time between two successful polls.
	DefaultInterval = 5 * time.Second
	// DefaultRequestTimeout bounds each poll, the body included.
	DefaultRequestTimeout = 10 * time.Second
	// DefaultMinBackoff is the first wait after a failed poll.
	DefaultMinBackoff = time.Second
	// DefaultMaxBackoff is the longest wait after failed polls.
	DefaultMaxBackoff = time.Minute
	// DefaultMaxBodyBytes is the largest response body accepted by
	// default when the process has no memory limit; under one, the default
	// is MaxBodyShare of it, at least MinMaxBodyBytes and at most this.
	DefaultMaxBodyBytes = 256 << 20
	// MaxBodyShare is the divisor of the memory limit that gives the
	// default bound of the body: decoded, a pod list takes 5 to 6 times its
	// JSON (a 200 MB body held 1.0 to 1.25 GB), so that a body of a tenth
	// of the limit, with its decoded pods, stays within about 60% of it.
	MaxBodyShare = 10
	// MinMaxBodyBytes is the smallest default bound of the body, whatever
	// the memory limit: a node of 250 pods of 16 KiB of JSON.
	MinMaxBodyBytes = 4 << 20
)

// Option configures a Source made by New.
type Option func(*options)

type options struct {
	source.Options
	url                string
	host               string
	interval           time.Duration
	timeout            time.Duration
	maxBody            int64
	tokenFile          string
	caFile             string
	insecureSkipVerify bool
	certFile, keyFile  string
}

func defaultOptions() options {
	return options{
		Options:  source.Options{Logger: slog.Default(), MinBackoff: DefaultMinBackoff, MaxBackoff: DefaultMaxBackoff},
		url:      DefaultURL,
		interval: DefaultInterval,
		timeout:  DefaultRequestTimeout,
	}
}

// WithURL sets the URL of the kubelet's /pods endpoint, http or https. The
// default is DefaultURL; the read-only port is http://127.0.0.1:10255/pods.
func WithURL(url string) Option {
	return func(o *options) { o.url = url }
}

// WithHost replaces the host of the URL (WithURL) with host, a name or an
// IP address, keeping the URL's scheme, port and path: an IPv6 address,
// given with or without brackets, is bracketed in the URL. It is for
// addresses known only when the server starts, such as the node's IP from
// the downward API, which a URL built by string concatenation would break
// when it is IPv6. The default, "", keeps the URL's host.
func WithHost(host string) Option {
	return func(o *options) { o.host = host }
}

// WithInterval sets the time between two successful polls. The default is
// DefaultInterval (5s). Non-positive values keep the default.
func WithInterval(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.interval = d
		}
	}
}

// WithRequestTimeout bounds each poll, from the request to the end of the
// body. The default is DefaultRequestTimeout (10s). Non-positive values keep
// the default.
func WithRequestTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.timeout = d
		}
	}
}

// WithBackoff sets the first and the longest wait after a failed poll. Each
// failure doubles the wait up to maxWait, with up to half of it randomly
// taken off (jitter); a successful poll resets it. The defaults are
// DefaultMinBackoff (1s) and DefaultMaxBackoff (1m). Non-positive values
// keep the defaults; maxWait is raised to minWait if smaller.
func WithBackoff(minWait, maxWait time.Duration) Option {
	return func(o *options) { o.SetBackoff(minWait, maxWait) }
}

// WithMaxBodyBytes sets the size of the largest response body accepted,
// counted after decompression (a gzip body is bounded by what it inflates
// to); a larger one fails the poll, reason too_large. The default is
// derived from the memory limit of the process when New is called (see
// MaxBodyShare): a tenth of it, between MinMaxBodyBytes and
// DefaultMaxBodyBytes (256 MiB, also the default without a limit).
// Non-positive values keep the default.
func WithMaxBodyBytes(n int64) Option {
	return func(o *options) {
		if n > 0 {
			o.maxBody = n
		}
	}
}

// WithTokenFile sets a file holding a bearer token, sent in the
// Authorization header. The file is read at each poll, so that a rotated
// token (such as a projected service account token) is picked up. The
// default is no token.
func WithTokenFile(path string) Option {
	return func(o *options) { o.tokenFile = path }
}

// WithCAFile sets a PEM file of the certificate authorities that sign the
// kubelet's serving certificate. The default is the system's roots.
func WithCAFile(path string) Option {
	return func(o *options) { o.caFile = path }
}

// WithInsecureSkipVerify turns off the verification of the kubelet's
// serving certificate, which is often self-signed. The default is to verify
// it. It takes precedence over WithCAFile.
func WithInsecureSkipVerify(skip bool) Option {
	return func(o *options) { o.insecureSkipVerify = skip }
}

// WithClientCert sets a PEM client certificate and key to authenticate to
// the kubelet with. They are read again for each new connection, so that
// rotated certificates are picked up. The default is no client
// certificate.
func WithClientCert(certFile, keyFile string) Option {
	return func(o *options) { o.certFile, o.keyFile = certFile, keyFile }
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
