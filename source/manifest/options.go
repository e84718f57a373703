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

// Option configures a Source made by New.
type Option func(*options)

type options struct {
	source.Options
	resync time.Duration
}

func defaultOptions() options {
	return options{
		Options: source.Options{Logger: slog.Default()},
		resync:  DefaultResyncInterval,
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
