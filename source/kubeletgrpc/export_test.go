package kubeletgrpc

import (
	"context"
	"net"
	"time"
)

// WithDialer makes the Source dial with dial instead of its socket, for the
// tests that run it over in-memory connections.
func WithDialer(dial func(ctx context.Context) (net.Conn, error)) Option {
	return func(o *options) { o.dial = dial }
}

// WithUncheckedPingInterval sets the ping interval without raising it to
// MinPingInterval: the tests show what a shorter one costs.
func WithUncheckedPingInterval(d time.Duration) Option {
	return func(o *options) { o.ping = d }
}
