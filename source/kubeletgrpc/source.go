package kubeletgrpc

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1/v1alpha1connect"
	"github.com/podsapi/podsapi/internal/h2c"
	"github.com/podsapi/podsapi/internal/retry"
	"github.com/podsapi/podsapi/source/internal/sourcelog"
	"github.com/podsapi/podsapi/source/internal/sourcemetrics"
)

// Source follows the Pods API of the kubelet on a UNIX socket. Make one
// with New and start it with Run.
type Source struct {
	socket     string
	log        *slog.Logger
	warn       *sourcelog.Warner // The upstream's faults, rate-limited.
	metrics    *sourcemetrics.Metrics
	minBackoff time.Duration
	maxBackoff time.Duration
	readMax    int
	ping       time.Duration
	resync     time.Duration // <= 0: no resync
	// dial, when set (by the tests), replaces the dialing of socket.
	dial     func(ctx context.Context) (net.Conn, error)
	snapshot snapshotBounds
}

// New returns a Source configured by opts. It registers the Source's
// metrics if WithRegisterer is given, and panics if that registerer holds a
// different metric of the same name.
func New(opts ...Option) *Source {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	s := &Source{
		socket:     h2c.SocketPath(o.socket),
		metrics:    newMetrics(o.Registerer),
		minBackoff: o.MinBackoff,
		maxBackoff: o.MaxBackoff,
		readMax:    o.readMaxBytes,
		ping:       o.ping,
		resync:     o.resync,
		dial:       o.dial,
		snapshot:   o.snapshot.resolve(),
	}
	s.log = o.Logger.With("source", s.Name())
	s.warn = sourcelog.New(s.log)
	return s
}

// Name returns "kubelet-grpc:" followed by the socket path, to tell the
// Source apart in logs.
func (s *Source) Name() string {
	return "kubelet-grpc:" + s.socket
}

// Run watches the kubelet's pods and sends them to sink, calling
// sink.MarkSynced after the first complete snapshot, until ctx is
// cancelled; see the package documentation. It calls sink from its own
// goroutine only and assumes sink starts without any of this Source's pods.
//
// Run returns nil when ctx is cancelled, and an error only if the socket
// path is empty. A kubelet that does not answer is retried forever: until
// the first snapshot the sink stays unsynced, afterwards it keeps the last
// known pods.
func (s *Source) Run(ctx context.Context, sink Sink) error {
	if s.socket == "" {
		return errors.New("kubeletgrpc: the socket path is empty")
	}
	httpClient := h2c.NewClient(s.socket)
	if t, ok := httpClient.Transport.(*http.Transport); ok {
		// Pings no more often than a grpc-go server permits by default:
		// see MinPingInterval.
		t.HTTP2 = &http.HTTP2Config{SendPingTimeout: s.ping, PingTimeout: PingTimeout}
		if s.dial != nil {
			t.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) { return s.dial(ctx) }
		}
		defer t.CloseIdleConnections()
	}
	// A WatchPods event carries one pod; a resync's ListPods every pod,
	// bounded as a snapshot is.
	client := v1alpha1connect.NewPodsClient(httpClient, h2c.BaseURL,
		connect.WithGRPC(), connect.WithReadMaxBytes(s.readMax))
	lists := v1alpha1connect.NewPodsClient(httpClient, h2c.BaseURL,
		connect.WithGRPC(), connect.WithReadMaxBytes(int(min(s.snapshot.bytes+EventSlack, math.MaxInt32))))

	st := newState(s, sink)
	st.lists = lists
	bo := retry.NewBackoff(s.minBackoff, s.maxBackoff)
	for {
		res := st.watch(ctx, client)
		if ctx.Err() != nil {
			return nil
		}
		if res.synced {
			bo.Reset()
		}
		st.fail(res.reason, res.err)
		timer := time.NewTimer(bo.Next())
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
	}
}
