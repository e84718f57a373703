package nri

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containerd/nri/pkg/stub"

	"github.com/podsapi/podsapi/internal/retry"
)

// DefaultSocket is where containerd and CRI-O serve NRI.
const DefaultSocket = "/var/run/nri/nri.sock"

// Defaults of the options.
const (
	// DefaultPluginName is the name the observer registers with.
	DefaultPluginName = "podsapi"
	// DefaultPluginIndex is the index the observer registers with: the
	// last, since it adjusts nothing and reads what the others did.
	DefaultPluginIndex = "99"
	// DefaultFirstWait and DefaultMaxWait bound the waits between
	// connection attempts.
	DefaultFirstWait = 500 * time.Millisecond
	DefaultMaxWait   = 30 * time.Second
)

// Observer connects to the runtime's NRI socket as a plugin, again after
// each disconnection, and hands what the runtime tells to its Sink.
type Observer struct {
	socket    string
	sink      Sink
	logger    *slog.Logger
	metrics   *Metrics
	name, idx string
	first     time.Duration
	max       time.Duration

	// gen numbers the connections; mu orders the events' effects on the
	// sink (plugin.apply).
	gen atomic.Uint64
	mu  sync.Mutex
}

// Option configures an Observer.
type Option func(*Observer)

// WithLogger sets the logger. The default discards.
func WithLogger(l *slog.Logger) Option { return func(o *Observer) { o.logger = l } }

// WithMetrics sets the metrics the observer counts in. The default counts
// nothing.
func WithMetrics(m *Metrics) Option { return func(o *Observer) { o.metrics = m } }

// WithBackoff sets the waits between connection attempts: first, doubled
// each attempt up to max, each lengthened by up to half at random. The
// defaults are DefaultFirstWait and DefaultMaxWait.
func WithBackoff(first, max time.Duration) Option {
	return func(o *Observer) { o.first, o.max = first, max }
}

// WithPlugin sets the name and index the observer registers with. The
// defaults are DefaultPluginName and DefaultPluginIndex.
func WithPlugin(name, index string) Option {
	return func(o *Observer) { o.name, o.idx = name, index }
}

// New returns an observer of the NRI socket, handing the facts to sink.
func New(socket string, sink Sink, opts ...Option) *Observer {
	o := &Observer{
		socket: socket, sink: sink,
		logger: slog.New(slog.DiscardHandler),
		name:   DefaultPluginName, idx: DefaultPluginIndex,
		first: DefaultFirstWait, max: DefaultMaxWait,
	}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// Run connects and observes until ctx is done, connecting again with
// backoff whenever the runtime is not there or closes the connection (it
// restarted, or found the observer too slow). It returns nil when ctx is
// done.
func (o *Observer) Run(ctx context.Context) error {
	backoff := retry.NewBackoff(o.first, o.max)
	logged := false
	for {
		synced, err := o.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if synced {
			backoff.Reset()
			logged = false
			o.logger.Warn("lost the connection to the container runtime's NRI; connecting again", "socket", o.socket, "error", err)
		} else if !logged {
			// Logged once per outage: a node without NRI would
			// otherwise log every attempt.
			logged = true
			o.logger.Warn("cannot connect to the container runtime's NRI; trying again with backoff", "socket", o.socket, "error", err)
		}
		t := time.NewTimer(backoff.Next())
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// session runs one connection, and reports whether the runtime's
// synchronisation was taken.
func (o *Observer) session(ctx context.Context) (synced bool, err error) {
	var (
		mu   sync.Mutex
		conn net.Conn
		once sync.Once
	)
	syncedC := make(chan struct{})
	p := &plugin{o: o, gen: o.gen.Add(1), synced: func() {
		once.Do(func() {
			o.metrics.setConnected(true)
			close(syncedC)
		})
	}}
	defer o.metrics.setConnected(false)
	s, err := stub.New(p,
		stub.WithSocketPath(o.socket),
		stub.WithPluginName(o.name),
		stub.WithPluginIdx(o.idx),
		stub.WithLogger(nriLogger{o.logger}),
		stub.WithDialer(func(path string) (net.Conn, error) {
			var d net.Dialer
			dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			c, err := d.DialContext(dctx, "unix", path)
			mu.Lock()
			conn = c
			mu.Unlock()
			return c, err
		}),
	)
	if err != nil {
		return false, fmt.Errorf("NRI plugin: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		// The stub stops on ctx, unless it still waits for the runtime to
		// configure it, which it does without a context: the connection
		// is closed under it.
		mu.Lock()
		if conn != nil {
			conn.Close()
		}
		mu.Unlock()
		select {
		case err = <-done:
		case <-time.After(stub.DefaultRegistrationTimeout):
			err = errors.New("the NRI plugin did not stop")
		}
	}
	select {
	case <-syncedC:
		synced = true
	default:
	}
	return synced, err
}

// nriLogger is NRI's logger on slog: its chatter (plugin created, started,
// configured) at debug.
type nriLogger struct{ l *slog.Logger }

func (n nriLogger) Debugf(ctx context.Context, format string, args ...any) {
	n.l.Debug("nri: " + fmt.Sprintf(format, args...))
}

func (n nriLogger) Infof(ctx context.Context, format string, args ...any) {
	n.l.Debug("nri: " + fmt.Sprintf(format, args...))
}

func (n nriLogger) Warnf(ctx context.Context, format string, args ...any) {
	n.l.Warn("nri: " + fmt.Sprintf(format, args...))
}

func (n nriLogger) Errorf(ctx context.Context, format string, args ...any) {
	n.l.Warn("nri: " + fmt.Sprintf(format, args...))
}
