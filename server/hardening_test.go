package server_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/internal/rigs/podstest"
	"github.com/podsapi/podsapi/server"
)

// gaugeValue returns the value of the gauge name in reg, or 0.
func gaugeValue(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) > 0 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return 0
}

// h2Frame is a frame read by a raw HTTP/2 client.
type h2Frame struct {
	typ, flags byte
	stream     uint32
	payload    []byte
}

// rawH2 dials socket, sends the client preface and an empty SETTINGS frame,
// and returns the connection. It answers nothing afterwards.
func rawH2(t *testing.T, socket string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(podstest.Deadline(t))
	// A connection the server refused fails this write: readFrames then
	// sees it closed.
	_, _ = io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
	return c
}

// readFrames reads frames until the server closes c, and returns them.
func readFrames(t *testing.T, c net.Conn) []h2Frame {
	t.Helper()
	var frames []h2Frame
	for {
		var hdr [9]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "reset by peer") {
				return frames
			}
			t.Fatalf("reading frames: %v (the server did not close the connection)", err)
		}
		n := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
		f := h2Frame{typ: hdr[3], flags: hdr[4], stream: binary.BigEndian.Uint32(hdr[5:]) &^ (1 << 31), payload: make([]byte, n)}
		if _, err := io.ReadFull(c, f.payload); err != nil {
			return frames
		}
		frames = append(frames, f)
	}
}

// TestPerClientRateLimit spends one client's bucket: its calls get
// RESOURCE_EXHAUSTED naming the per-client limit.
func TestPerClientRateLimit(t *testing.T) {
	f := start(t, server.Config{Limits: server.LimitsConfig{QPS: -1, PerClientQPS: 1e-6, PerClientBurst: 2}}, false, samplePods()...)
	c := clientKinds[0].dial(t, f.socket)
	for i := range 2 {
		if _, err := c.List(ctx(t), nil); err != nil {
			t.Fatalf("call %d within the burst: %v", i, err)
		}
	}
	_, err := c.List(ctx(t), nil)
	if codeOf(err) != connect.CodeResourceExhausted || !strings.Contains(messageOf(err), "per-client") {
		t.Fatalf("beyond the per-client burst: %v, want ResourceExhausted about the per-client limit", err)
	}
}

// TestMaxWatchers opens watches up to the limit: one more is
// RESOURCE_EXHAUSTED, and ending one makes room again.
func TestMaxWatchers(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := start(t, server.Config{Registry: reg, Limits: server.LimitsConfig{MaxWatchers: 2}}, false, samplePods()...)
	c := clientKinds[0].dial(t, f.socket)
	wctx, cancel := context.WithCancel(ctx(t))
	for range 2 {
		w, err := c.Watch(wctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		recv(t, w)
	}
	w, err := c.Watch(ctx(t), nil)
	if err == nil {
		_, err = w.Recv()
	}
	if codeOf(err) != connect.CodeResourceExhausted || !strings.Contains(messageOf(err), "too many watches") {
		t.Fatalf("watch beyond the limit: %v, want ResourceExhausted", err)
	}
	cancel()
	// The two cancelled watches and the refused one, served to the end.
	f.WaitServed(t, podsv1alpha1connect.PodsWatchPodsProcedure, 3)
	if got := gaugeValue(t, reg, "podsapi_watches_open"); got != 0 {
		t.Fatalf("podsapi_watches_open = %v once every watch ended, want 0", got)
	}
	w, err = c.Watch(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	recv(t, w)
}

// TestMaxConnections closes connections beyond the limit as soon as they
// are accepted, and accepts again once a slot is free.
func TestMaxConnections(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := start(t, server.Config{Registry: reg, Limits: server.LimitsConfig{MaxConnections: 1}}, false, samplePods()...)
	first := connectClient{podstest.ConnectClient(t, f.socket)}
	if _, err := first.List(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
	extra := rawH2(t, f.socket)
	if frames := readFrames(t, extra); len(frames) != 0 {
		t.Fatalf("a connection beyond the limit got %d frames, want to be closed at once", len(frames))
	}
	if got := metricValue(t, reg, "podsapi_connections_rejected_total", nil); got != 1 {
		t.Fatalf("podsapi_connections_rejected_total = %v, want 1", got)
	}
	if got := gaugeValue(t, reg, "podsapi_connections_open"); got != 1 {
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
	for _, kind := range clientKinds[1:] {
		t.Run(kind.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			pod := podstest.Pod("default", "busy", 1)
			pod.Annotations["padding"] = strings.Repeat("x", 64<<10)
			f := start(t, server.Config{Registry: reg, Watch: server.WatchConfig{Queue: 2}, Transport: server.TransportConfig{WriteStallTimeout: 100 * time.Millisecond}}, false, pod)
			w, err := kind.dialSmallWindow(t, f.socket).Watch(ctx(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			recv(t, w)
			recv(t, w)
			for k := 0; metricValue(t, reg, "kubelet_pod_watch_events_dropped_total", nil) == 0; k++ {
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
			if got := metricValue(t, reg, "podsapi_stalled_streams_reset_total", nil); got != 1 {
				t.Fatalf("podsapi_stalled_streams_reset_total = %v, want 1", got)
			}
			if got := gaugeValue(t, reg, "podsapi_watches_open"); got != 0 {
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
