package server_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestPerClientRateLimit spends one client's bucket: its calls get
// RESOURCE_EXHAUSTED naming the per-client limit.
func TestPerClientRateLimit(t *testing.T) {
	f := start(t, server.Config{Limits: server.LimitsConfig{QPS: -1, PerClientQPS: 1e-6, PerClientBurst: 2}}, false, podstest.SamplePods()...)
	c := podstest.ClientKinds[0].Dial(t, f.socket)
	for i := range 2 {
		if _, err := c.List(ctx(t), nil); err != nil {
			t.Fatalf("call %d within the burst: %v", i, err)
		}
	}
	_, err := c.List(ctx(t), nil)
	if podstest.ErrorCode(err) != connect.CodeResourceExhausted || !strings.Contains(podstest.ErrorMessage(err), "per-client") {
		t.Fatalf("beyond the per-client burst: %v, want ResourceExhausted about the per-client limit", err)
	}
}

// TestMaxWatchers opens watches up to the limit (one client, with no share
// of its own): one more is RESOURCE_EXHAUSTED, and ending one makes room
// again.
func TestMaxWatchers(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := start(t, server.Config{Registry: reg, Limits: server.LimitsConfig{MaxWatchers: 2, MaxWatchersPerClient: -1}}, false, podstest.SamplePods()...)
	c := podstest.ClientKinds[0].Dial(t, f.socket)
	wctx, cancel := context.WithCancel(ctx(t))
	for range 2 {
		w, err := c.Watch(wctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		podstest.Recv(t, w)
	}
	w, err := c.Watch(ctx(t), nil)
	if err == nil {
		_, err = w.Recv()
	}
	if podstest.ErrorCode(err) != connect.CodeResourceExhausted || !strings.Contains(podstest.ErrorMessage(err), "too many watches") {
		t.Fatalf("watch beyond the limit: %v, want ResourceExhausted", err)
	}
	cancel()
	// The two cancelled watches and the refused one, served to the end.
	f.WaitServed(t, podsv1alpha1connect.PodsWatchPodsProcedure, 3)
	if got := podstest.GaugeValue(t, reg, "podsapi_watches_open"); got != 0 {
		t.Fatalf("podsapi_watches_open = %v once every watch ended, want 0", got)
	}
	w, err = c.Watch(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	podstest.Recv(t, w)
}

// TestMaxConnections closes connections beyond the limit as soon as they
// are accepted, and accepts again once a slot is free.
func TestMaxConnections(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := start(t, server.Config{Registry: reg, Limits: server.LimitsConfig{MaxConnections: 1}}, false, podstest.SamplePods()...)
	first := podstest.ClientKinds[0].Dial(t, f.socket)
	if _, err := first.List(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	extra := podstest.RawH2(t, f.socket)
	if frames := podstest.ReadFrames(t, extra); len(frames) != 0 {
		t.Fatalf("a connection beyond the limit got %d frames, want to be closed at once", len(frames))
	}
	if got := podstest.MetricValue(t, reg, "podsapi_connections_rejected_total", nil); got != 1 {
		t.Fatalf("podsapi_connections_rejected_total = %v, want 1", got)
	}
	if got := podstest.GaugeValue(t, reg, "podsapi_connections_open"); got != 1 {
		t.Fatalf("podsapi_connections_open = %v, want 1", got)
	}
}

// TestStalledWatcherFreed: a watcher that stops reading is dropped, and its
// handler, blocked writing to a client that never reads again, is freed by
// the write-stall timeout instead of waiting for the client to leave. It is
// the socket's smoke test of the timers of server/internal/transport, which
// tests them (stall reaper, idle timeout, keepalive, request deadlines) on
// synctest's clock.
// grpc-go is the client that holds its flow-control window closed until the
// application reads (Go's HTTP/2 transport buffers more than it announces).
func TestStalledWatcherFreed(t *testing.T) {
	for _, kind := range podstest.ClientKinds[1:] {
		t.Run(kind.Name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			pod := podstest.Pod("default", "busy", 1)
			pod.Annotations["padding"] = strings.Repeat("x", 64<<10)
			f := start(t, server.Config{Registry: reg, Watch: server.WatchConfig{Queue: 2}, Transport: server.TransportConfig{WriteStallTimeout: 100 * time.Millisecond}}, false, pod)
			w, err := kind.DialSmallWindow(t, f.socket).Watch(ctx(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			podstest.Recv(t, w)
			podstest.Recv(t, w)
			for k := 0; podstest.MetricValue(t, reg, "kubelet_pod_watch_events_dropped_total", nil) == 0; k++ {
				if k == 10000 {
					t.Fatal("the stalled watcher was never dropped")
				}
				p := pod.DeepCopy()
				p.ResourceVersion = strconv.Itoa(k + 2)
				f.store.Upsert(p)
			}
			// The handler, blocked writing to a client that does not
			// read, returns only once its stream is reset.
			f.WaitServed(t, podsv1alpha1connect.PodsWatchPodsProcedure, 1)
			if got := podstest.MetricValue(t, reg, "podsapi_stalled_streams_reset_total", nil); got != 1 {
				t.Fatalf("podsapi_stalled_streams_reset_total = %v, want 1", got)
			}
			if got := podstest.GaugeValue(t, reg, "podsapi_watches_open"); got != 0 {
				t.Fatalf("podsapi_watches_open = %v once the watch handler returned, want 0", got)
			}
			// The client, reading again, sees the stream end.
			for {
				if _, err := w.Recv(); err != nil {
					break
				}
			}
		})
	}
}
