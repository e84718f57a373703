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

	"github.com/containerd/nri/pkg/api"
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
	// DefaultConfigureTimeout bounds the wait, from the connection, for
	// the runtime to configure the plugin: twice NRI's registration
	// timeout, which a runtime gives the plugin to register before it
	// configures it.
	DefaultConfigureTimeout = 2 * stub.DefaultRegistrationTimeout
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
	configure time.Duration

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

// WithConfigureTimeout sets how long the observer waits, from the
// connection, for the runtime to configure it before it gives the
// connection up and connects again. The default is
// DefaultConfigureTimeout.
func WithConfigureTimeout(d time.Duration) Option {
	return func(o *Observer) { o.configure = d }
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
		configure: DefaultConfigureTimeout,
	}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// Run connects and observes until ctx is done, connecting again with
// backoff whenever the runtime is not there or closes the connection (it
// restarted, or found the observer too slow). It returns nil when ctx is
// done. While it runs, what NRI's libraries log through logrus goes to
// its logger (RouteLogs).
func (o *Observer) Run(ctx context.Context) error {
	defer RouteLogs(o.logger)()
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
//
// NRI's stub waits for the runtime to configure it without a context:
// a runtime that registers the plugin and never configures it would hold
// the stub's goroutines for ever, one set per connection. A watchdog
// gives such a connection up after the configure timeout (or when ctx is
// done): it closes the connection, and, when the stub has registered and
// so waits for its configuration, configures the stub itself with a
// configuration the plugin refuses, so that the stub fails and stops.
func (o *Observer) session(ctx context.Context) (synced bool, err error) {
	var (
		mu   sync.Mutex
		conn *watchedConn
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
			if err != nil {
				return nil, err
			}
			w := &watchedConn{Conn: c, wrote: make(chan struct{})}
			mu.Lock()
			defer mu.Unlock()
			if p.state.Load() == stateAbandoned {
				c.Close()
				return nil, errAbandoned
			}
			conn = w
			return w, nil
		}),
	)
	if err != nil {
		return false, fmt.Errorf("NRI plugin: %w", err)
	}
	abandon := func() {
		if !p.state.CompareAndSwap(stateWaiting, stateAbandoned) {
			return // configured: the stub stops on ctx or when the connection closes
		}
		mu.Lock()
		c := conn
		mu.Unlock()
		if c == nil {
			return // not connected: the dialer refuses to connect now
		}
		c.Close()
		select {
		case <-c.wrote:
			// The stub has sent its registration: it may wait for its
			// configuration, which only a Configure call ends. The
			// plugin refuses it (abandoned), and the stub stops. The
			// call has a goroutine of its own: should the stub have
			// failed its registration and a runtime's Configure have
			// come at this very moment, the stub's channel would
			// take that one answer and this call would stay blocked
			// (one goroutine, in that race only, never the session).
			if cfg, ok := s.(configurer); ok {
				go func() {
					_, _ = cfg.Configure(context.Background(), &api.ConfigureRequest{
						RuntimeName: "podsapi-watchdog", NRIVersion: "abandoned"})
				}()
			}
		default:
			// Not registered yet: the closed connection fails it.
		}
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	watchdog := time.NewTimer(o.configure)
	defer watchdog.Stop()
	select {
	case err = <-done:
	case <-watchdog.C:
		abandon()
		if p.state.Load() == stateAbandoned {
			err = <-done
			if err == nil || errors.Is(err, errAbandoned) {
				err = errAbandoned
			}
			break
		}
		select {
		case err = <-done:
		case <-ctx.Done():
			err = o.stop(abandon, done)
		}
	case <-ctx.Done():
		err = o.stop(abandon, done)
	}
	select {
	case <-syncedC:
		synced = true
	default:
	}
	return synced, err
}

// stop gives up a session when ctx is done, and waits for its stub to
// return.
func (o *Observer) stop(abandon func(), done <-chan error) error {
	// The stub stops on ctx once configured; before, abandon stops it.
	abandon()
	select {
	case err := <-done:
		return err
	case <-time.After(stub.DefaultRegistrationTimeout):
		return errors.New("the NRI plugin did not stop")
	}
}

// configurer is the stub's Configure, which the runtime calls: the
// watchdog calls it to end a stub that waits for a configuration that
// does not come.
type configurer interface {
	Configure(context.Context, *api.ConfigureRequest) (*api.ConfigureResponse, error)
}

// watchedConn is the connection to the runtime, telling when the stub
// first wrote to it (its registration: the stub has then made the channel
// its configuration is handed on, so the watchdog may configure it).
type watchedConn struct {
	net.Conn
	once  sync.Once
	wrote chan struct{}
}

func (c *watchedConn) Write(b []byte) (int, error) {
	c.once.Do(func() { close(c.wrote) })
	return c.Conn.Write(b)
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
