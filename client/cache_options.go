package client

import "time"

// Defaults of the cache's reconnection backoff.
const (
	DefaultMinBackoff = 200 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
)

// CacheOption configures a Cache. WithFields, WithNamespace,
// WithLabelSelector and WithFieldSelector are CacheOptions too.
type CacheOption interface {
	applyCache(*cacheOptions)
}

// cacheOptions holds the options of a Cache.
type cacheOptions struct {
	fields []string
	selection
	minBackoff time.Duration
	maxBackoff time.Duration
	onError    func(error)
}

// cacheOptionFunc is a CacheOption that is a function.
type cacheOptionFunc func(*cacheOptions)

func (f cacheOptionFunc) applyCache(o *cacheOptions) { f(o) }

// WithBackoff sets the bounds of the jittered exponential backoff between
// two attempts to watch: the first retry waits about min, each following
// one twice as long, up to max. A watch that reaches its Synced event resets
// the backoff. The defaults are DefaultMinBackoff and DefaultMaxBackoff.
func WithBackoff(min, max time.Duration) CacheOption {
	return cacheOptionFunc(func(o *cacheOptions) { o.minBackoff, o.maxBackoff = min, max })
}

// WithErrorHandler sets a function told about every error after which the
// cache watches again (a server that is not running, not synced yet, or
// that shut down; a dropped watch), for logging. It is called from the
// goroutine of Run. By default these errors are dropped. An error the cache
// does not retry (Terminal) is not given to it: Run, WaitForSync and Err
// return that one.
func WithErrorHandler(f func(error)) CacheOption {
	return cacheOptionFunc(func(o *cacheOptions) { o.onError = f })
}
