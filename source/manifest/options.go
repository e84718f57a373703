package manifest

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/source"
)

// DefaultResyncInterval is the interval of the periodic full rescan when
// WithResyncInterval is not given.
const DefaultResyncInterval = time.Minute

// DefaultMaxFileBytes is the size cap of a manifest file when
// WithMaxFileBytes is not given: 1 MiB, a third of the API server's
// default request size limit of 3 MiB.
const DefaultMaxFileBytes = 1 << 20

// Option configures a Source made by New.
type Option func(*options)

type options struct {
	source.Options
	resync   time.Duration
	maxBytes int64
}

func defaultOptions() options {
	return options{
		Options:  source.Options{Logger: slog.Default()},
		resync:   DefaultResyncInterval,
		maxBytes: DefaultMaxFileBytes,
	}
}

// WithLogger sets the logger of the Source. The default is slog.Default()
// at the time New is called. A nil logger keeps the default. Every record
// carries the attribute source=Name().
func WithLogger(logger *slog.Logger) Option {
	return func(o *options) { o.SetLogger(logger) }
}

// WithRegisterer registers the metrics of the Source, the counter
// podsapi_manifest_errors_total, with reg. The default is to register no
// metrics (the counter is still kept, but nothing exports it).
//
// Several Sources may share one registerer: they then share the counter.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(o *options) { o.Registerer = reg }
}

// WithResyncInterval sets the interval of the periodic full rescan of the
// directory, a safety net against missed file system events; the rescan
// sends the sink only what differs from the state it already has. The
// default is DefaultResyncInterval (one minute), which zero keeps. A
// negative interval disables the periodic rescan; the Source then also does
// not retry watching a directory that disappeared (see the package
// documentation).
func WithResyncInterval(d time.Duration) Option {
	return func(o *options) {
		switch {
		case d < 0:
			o.resync = 0
		case d > 0:
			o.resync = d
		}
	}
}

// WithMaxFileBytes caps the size of a manifest file, and the size of each
// of its YAML documents with every alias expanded, at n bytes. A larger
// file, or a document whose aliases would expand it beyond n, is rejected
// with reason "too_large" (see the package documentation) after reading at
// most n+1 bytes of it. The default is DefaultMaxFileBytes (1 MiB), which
// zero keeps (the zero rule of package source). A negative n removes both
// caps: do that only for a directory that only trusted writers can change.
func WithMaxFileBytes(n int64) Option {
	return func(o *options) {
		switch {
		case n < 0:
			o.maxBytes = 0
		case n > 0:
			o.maxBytes = n
		}
	}
}
