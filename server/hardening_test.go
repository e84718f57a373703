package server_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/internal/podstest"
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

// HTTP/2 frame types the tests look for.
const (
	frameSettings = 0x4
	framePing     = 0x6
	frameGoAway   = 0x7
)

// rawH2 dials socket, sends the client preface and an empty SETTINGS frame,
// and returns the connection. It answers nothing afterwards.
func rawH2(t *testing.T, socket string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(testTimeout))
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

func hasFrame(frames []h2Frame, typ byte) bool {
	for _, f := range frames {
		if f.typ == typ && (typ != framePing || f.flags&1 == 0) {
			return true
		}
	}
	return false
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
	f.waitServed(t, podsv1alpha1connect.PodsWatchPodsProcedure, 3)
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

// TestIdleTimeout: a connection without calls is closed with a GOAWAY after
// the idle timeout, one with an open watch is not.
func TestIdleTimeout(t *testing.T) {
	pods := samplePods()
	f := start(t, server.Config{Transport: server.TransportConfig{IdleTimeout: 100 * time.Millisecond}}, false, pods...)
	w, err := clientKinds[0].dial(t, f.socket).Watch(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	for range len(pods) + 1 {
		recv(t, w)
	}
	idle := rawH2(t, f.socket)
	start := time.Now()
	if frames := readFrames(t, idle); !hasFrame(frames, frameGoAway) {
		t.Fatalf("idle connection closed without GOAWAY: %v", frames)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("idle connection closed after %v, before the idle timeout", d)
	}
	p := pods[0].DeepCopy()
	p.ResourceVersion = "after-idle"
	f.store.Upsert(p)
	if got := recv(t, w).GetPod().GetMetadata().GetResourceVersion(); got != "after-idle" {
		t.Fatalf("watch got %q, want the change after the idle timeout", got)
	}
}

// TestKeepalive: a peer that never answers pings is closed.
func TestKeepalive(t *testing.T) {
	f := start(t, server.Config{Transport: server.TransportConfig{KeepaliveInterval: 50 * time.Millisecond, KeepaliveTimeout: 50 * time.Millisecond}}, false)
	frames := readFrames(t, rawH2(t, f.socket))
	if !hasFrame(frames, framePing) {
		t.Fatalf("dead peer closed without a PING: %v", frames)
	}
}

// TestStalledConnectionClosed: a client that opens a wide flow-control
// window, asks for more than the socket can buffer and never reads gets
// its connection closed by the write-stall timeout, which frees the
// server's writer and the calls waiting on it.
func TestStalledConnectionClosed(t *testing.T) {
	reg := prometheus.NewRegistry()
	pod := podstest.Pod("default", "big", 1)
	pod.Annotations["padding"] = strings.Repeat("x", 200<<10)
	pods := []*corev1.Pod{pod}
	for i := range 20 {
		p := pod.DeepCopy()
		p.Name, p.UID = fmt.Sprintf("big-%d", i), types.UID(fmt.Sprintf("uid-big-%d", i))
		pods = append(pods, p)
	}
	f := start(t, server.Config{Registry: reg, Transport: server.TransportConfig{WriteStallTimeout: 100 * time.Millisecond}}, false, pods...)
	c := dialH2(t, f.socket)
	if err := c.write(func(fr *http2.Framer) error {
		if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1}); err != nil {
			return err
		}
		return fr.WriteWindowUpdate(0, 1<<31-1-65535)
	}); err != nil {
		t.Fatal(err)
	}
	// A ListPods of 4 MiB, which no socket buffers whole.
	id := c.open(podsv1alpha1connect.PodsListPodsProcedure)
	if err := c.write(func(fr *http2.Framer) error { return fr.WriteData(id, true, make([]byte, 5)) }); err != nil {
		t.Fatal(err)
	}
	// Only the stall guard closes this connection: the client does not
	// read, nor close it, until then.
	f.waitClosed(t, 1)
	if got := metricValue(t, reg, "podsapi_stalled_connections_closed_total", nil); got != 1 {
		t.Fatalf("podsapi_stalled_connections_closed_total = %v, want 1", got)
	}
	if got := gaugeValue(t, reg, "podsapi_connections_open"); got != 0 {
		t.Fatalf("podsapi_connections_open = %v once the stalled connection is closed, want 0", got)
	}
	// The client, reading at last, finds the connection closed before the
	// end of the answer.
	if _, err := io.Copy(io.Discard, c.conn); err != nil && !strings.Contains(err.Error(), "reset by peer") {
		t.Fatalf("reading the closed connection: %v", err)
	}
}

// TestStalledWatcherFreed: a watcher that stops reading is dropped, and its
// handler, blocked writing to a client that never reads again, is freed by
// the write-stall timeout instead of waiting for the client to leave.
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
			f.waitServed(t, podsv1alpha1connect.PodsWatchPodsProcedure, 1)
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
