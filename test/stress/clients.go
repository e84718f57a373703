package stress

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/internal/h2c"
)

// watchMask is the field mask of the reading watchers: what they check.
const watchMask = "metadata.annotations,metadata.resourceVersion"

// newClient returns a connect gRPC client on its own connection(s) and the
// function that closes them.
func newClient(socket string, opts ...connect.ClientOption) (podsv1alpha1connect.PodsClient, func()) {
	hc := h2c.NewClient(socket)
	opts = append([]connect.ClientOption{connect.WithGRPC(), connect.WithReadMaxBytes(256 << 20)}, opts...)
	return podsv1alpha1connect.NewPodsClient(hc, h2c.BaseURL, opts...), hc.CloseIdleConnections
}

// reader is a watcher that reads every event and checks that each pod's
// resource versions follow each other: nothing lost, nothing repeated.
type reader struct {
	mu        sync.Mutex
	modified  int
	gaps      int
	last      map[string]int
	latencies []time.Duration
	err       error
	synced    chan struct{}
	changed   chan struct{} // signalled after each event
	done      chan struct{}
}

// startReader opens a watch on its own connection; it runs until ctx ends.
func startReader(ctx context.Context, socket string) *reader {
	r := &reader{last: map[string]int{}, synced: make(chan struct{}), changed: make(chan struct{}, 1), done: make(chan struct{})}
	c, closeConns := newClient(socket)
	go func() {
		defer close(r.done)
		defer closeConns()
		req := connect.NewRequest(&podsv1alpha1.PodWatchRequest{})
		req.Header().Set("x-kubernetes-fieldmask", watchMask)
		s, err := c.WatchPods(ctx, req)
		if err != nil {
			r.fail(err)
			return
		}
		defer s.Close()
		for s.Receive() {
			ev := s.Msg()
			now := time.Now()
			md := ev.GetPod().GetMetadata()
			rv, _ := strconv.Atoi(md.GetResourceVersion())
			r.mu.Lock()
			switch ev.GetType() {
			case podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE:
				close(r.synced)
			case podsv1alpha1.EventType_EVENT_TYPE_ADDED:
				r.last[md.GetName()] = rv
			case podsv1alpha1.EventType_EVENT_TYPE_MODIFIED:
				r.modified++
				if rv != r.last[md.GetName()]+1 {
					r.gaps++
				}
				r.last[md.GetName()] = rv
				if sent, err := strconv.ParseInt(md.GetAnnotations()[SentAnnotation], 10, 64); err == nil {
					r.latencies = append(r.latencies, now.Sub(time.Unix(0, sent)))
				}
			}
			r.mu.Unlock()
			select {
			case r.changed <- struct{}{}:
			default:
			}
		}
		if ctx.Err() == nil {
			r.fail(s.Err())
		} else {
			r.fail(nil)
		}
	}()
	return r
}

func (r *reader) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
	}
}

// endErr returns the error the watch ended with.
func (r *reader) endErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// waitModified waits until the reader got n MODIFIED events in all, or
// timeout; it returns what it got.
func (r *reader) waitModified(n int, timeout time.Duration) int {
	deadline := time.After(timeout)
	for {
		r.mu.Lock()
		got := r.modified
		r.mu.Unlock()
		if got >= n {
			return got
		}
		select {
		case <-r.changed:
		case <-r.done:
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.modified
		case <-deadline:
			return got
		}
	}
}

// takeLatencies returns and forgets the latencies measured so far.
func (r *reader) takeLatencies() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.latencies
	r.latencies = nil
	return l
}

// p99 returns the 99th percentile of ls.
func p99(ls []time.Duration) time.Duration {
	if len(ls) == 0 {
		return 0
	}
	slices.Sort(ls)
	return ls[min(len(ls)-1, len(ls)*99/100)]
}

// stalledWatcher opens a watch with grpc-go and 64 KiB flow-control
// windows, and never reads it.
func stalledWatcher(ctx context.Context, socket string) (func(), error) {
	conn, err := grpc.NewClient("unix://"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		return nil, err
	}
	desc := &grpc.StreamDesc{StreamName: "WatchPods", ServerStreams: true}
	s, err := conn.NewStream(ctx, desc, podsv1alpha1connect.PodsWatchPodsProcedure)
	if err == nil {
		err = s.SendMsg(&podsv1alpha1.PodWatchRequest{})
	}
	if err == nil {
		err = s.CloseSend()
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return func() { conn.Close() }, nil
}

// dialer returns an HTTP client on socket whose connections the caller can
// close abruptly.
func dialer(socket string) (*http.Client, func() []net.Conn) {
	var mu sync.Mutex
	var conns []net.Conn
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{
		Protocols: protocols,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, "unix", socket)
			if err == nil {
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
			return c, err
		},
	}}
	return hc, func() []net.Conn {
		mu.Lock()
		defer mu.Unlock()
		return conns
	}
}
