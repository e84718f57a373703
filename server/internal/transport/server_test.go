package transport_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"

	corev1 "k8s.io/api/core/v1"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2"
	"google.golang.org/protobuf/proto"

	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/test/podstest"
)

// These tests are the transport attacks of a hostile node: the metrics
// endpoint exhausted with idle connections, decompression bombs, streams
// whose request never comes, slow prefaces filling the connection slots,
// and denied peers keeping connections.

// TestMetricsIdleConnections opens 3,000 keep-alive connections to the
// metrics endpoint, each sending one scrape and never reading: the server
// keeps at most MetricsMaxConnections of them, closes every one (shed for
// newer ones, refused, or closed when idle), its heap stays bounded, the
// API socket serves meanwhile, and a new scrape is served afterwards.
func TestMetricsIdleConnections(t *testing.T) {
	const attackers, maxConns = 3000, 8
	reg := prometheus.NewRegistry()
	f := start(t, server.Config{
		Registry: reg,
		Metrics:  server.MetricsConfig{Address: "127.0.0.1:0", Timeout: 500 * time.Millisecond, MaxConnections: maxConns},
	}, false, podstest.SamplePods()...)
	addr := f.Server.MetricsAddr().String()
	heapBefore := heapInUse()

	conns := make([]net.Conn, 0, attackers)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range attackers {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial metrics after %d connections: %v", len(conns), err)
		}
		conns = append(conns, c)
		c.SetDeadline(podstest.Deadline(t))
		// A closed connection fails the write: it is then read to EOF below.
		_, _ = io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
		if open := podstest.GaugeValue(t, reg, "podsapi_metrics_connections_open"); open > maxConns {
			t.Fatalf("%v metrics connections open, want at most %d", open, maxConns)
		}
	}
	if _, err := podstest.ClientKinds[0].Dial(t, f.Socket).List(t.Context(), nil); err != nil {
		t.Fatalf("ListPods during the attack: %v", err)
	}
	// Every attacking connection is closed by the server.
	for i, c := range conns {
		if err := drain(c); err != nil {
			t.Fatalf("attacking connection %d was not closed by the server: %v", i, err)
		}
	}
	if growth := heapInUse() - heapBefore; growth > 32<<20 {
		t.Errorf("heap in use grew by %d MiB under the attack, want less than 32", growth>>20)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape after the attack: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("podsapi_metrics_connections_shed_total")) {
		t.Fatalf("scrape after the attack: %s\n%.300s", resp.Status, body)
	}
	shed := podstest.MetricValue(t, reg, "podsapi_metrics_connections_shed_total", nil)
	rejected := podstest.MetricValue(t, reg, "podsapi_metrics_connections_rejected_total", nil)
	t.Logf("shed %v, rejected %v of %d connections", shed, rejected, attackers)
	if shed == 0 {
		t.Errorf("no connection shed: want idle ones to make room for new ones")
	}
}

// TestMetricsUnixSocket serves metrics on a UNIX socket, mode 0600.
func TestMetricsUnixSocket(t *testing.T) {
	path := podstest.SocketPath(t) + ".metrics"
	f := start(t, server.Config{Metrics: server.MetricsConfig{Address: "unix:" + path}}, false)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("metrics socket mode %v, want a socket with 0600", fi.Mode())
	}
	if got := f.Server.MetricsAddr().String(); got != path {
		t.Errorf("MetricsAddr = %q, want %q", got, path)
	}
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx2 context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx2, "unix", path)
	}}}
	resp, err := c.Get("http://metrics/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("podsapi_connections_open")) {
		t.Fatalf("scrape over the UNIX socket: %s\n%.300s", resp.Status, body)
	}
}

// drain reads c until the server closes it.
func drain(c net.Conn) error {
	_, err := io.Copy(io.Discard, c)
	if err != nil && strings.Contains(err.Error(), "reset by peer") {
		return nil
	}
	return err
}

// heapInUse returns the heap in use after a collection.
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// totalAlloc returns the bytes allocated since the process started.
func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// gzipBomb returns a gRPC message, gzip-compressed, inflating to n zero
// bytes.
func gzipBomb(t *testing.T, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zeros := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, len(zeros))
		zw.Write(zeros[:k])
		n -= k
	}
	zw.Close()
	return podstest.Envelope(1, buf.Bytes())
}

// TestHealthGzipBomb sends health checks whose gzip bodies inflate to
// 100 MiB (larger than the request limit even compressed) and to 3 MiB
// (under it compressed): both are refused RESOURCE_EXHAUSTED without being
// inflated in memory, and counted. The peer is denied the API (as root,
// only UID 4242 is allowed): health stays open to it.
func TestHealthGzipBomb(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := server.Config{Registry: reg, Hooks: podstest.AsRoot(), Access: server.AccessConfig{AllowedUIDs: []uint32{4242}}}
	f := start(t, cfg, false)
	c := podstest.HTTPClient(t, f.Socket)
	for _, tc := range []struct {
		name     string
		inflated int
	}{
		{"100 MiB", 100 << 20},
		{"3 MiB from under 4 KiB", 3 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := gzipBomb(t, tc.inflated)
			t.Logf("%d bytes on the wire", len(body))
			if tc.inflated < 100<<20 && len(body) > 4096 {
				t.Fatalf("the small bomb is %d bytes compressed, want it under the 4 KiB limit", len(body))
			}
			before := totalAlloc()
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://podsapi/grpc.health.v1.Health/Check", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/grpc")
			req.Header.Set("Grpc-Encoding", "gzip")
			req.Header.Set("Te", "trailers")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			status := resp.Header.Get("Grpc-Status")
			if status == "" {
				status = resp.Trailer.Get("Grpc-Status")
			}
			if status != strconv.Itoa(int(connect.CodeResourceExhausted)) {
				t.Errorf("grpc-status %q (%s), want RESOURCE_EXHAUSTED", status, resp.Trailer.Get("Grpc-Message")+resp.Header.Get("Grpc-Message"))
			}
			if alloc := totalAlloc() - before; alloc > 16<<20 {
				t.Errorf("the call allocated %d MiB, want less than 16", alloc>>20)
			}
		})
	}
	if got := podstest.MetricValue(t, reg, "podsapi_calls_refused_total", map[string]string{"service": "grpc.health.v1.Health", "code": "resource_exhausted"}); got != 2 {
		t.Errorf("podsapi_calls_refused_total for health = %v, want 2", got)
	}
}

// TestHeldStreams opens streams that send HEADERS and never their body, on
// every service: each ends DEADLINE_EXCEEDED after RequestReadTimeout (but
// the reflection streams beyond the client's 8, refused at once), and its
// handler returns (the deadlines' clock is tested with synctest in
// server/internal/transport).
func TestHeldStreams(t *testing.T) {
	f := start(t, server.Config{Limits: server.LimitsConfig{MaxPendingPerClient: 1000, MaxStreams: 1000}, Transport: server.TransportConfig{RequestReadTimeout: time.Second}}, false, podstest.SamplePods()...)
	// A first call lets the server start what it keeps running.
	if _, err := podstest.ClientKinds[0].Dial(t, f.Socket).List(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	paths := []string{
		"/kubelet.pods.v1alpha1.Pods/ListPods",
		"/kubelet.pods.v1alpha1.Pods/GetPod",
		"/kubelet.pods.v1alpha1.Pods/WatchPods",
		"/grpc.health.v1.Health/Check",
		"/grpc.health.v1.Health/Watch",
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
	}
	const perPath = 50
	c := podstest.DialH2(t, f.Socket)
	want := map[uint32]string{}
	for range perPath {
		for _, p := range paths {
			want[c.Open(p)] = p
		}
	}
	ends, _ := c.ReadUntil(func(ends map[uint32]podstest.StreamEnd, _, _ bool) bool { return len(ends) == len(want) })
	reflection, refused := 0, 0 // held reflection streams: a client may hold 8 at once
	for id, end := range ends {
		if want[id] == paths[len(paths)-1] && end.Status == strconv.Itoa(int(connect.CodeResourceExhausted)) {
			refused++
			continue
		}
		if end.Status != strconv.Itoa(int(connect.CodeDeadlineExceeded)) {
			t.Fatalf("held stream %d (%s) ended %+v, want DEADLINE_EXCEEDED", id, want[id], end)
		}
		if want[id] == paths[len(paths)-1] {
			reflection++
		}
	}
	// 8 are held at once; a held stream that ended frees its place for one
	// opened after it, which a busy machine can make happen before the
	// last of the 50 is opened: so at least 8 are held, and some refused.
	if reflection < 8 || refused == 0 {
		t.Errorf("%d held reflection streams ended DEADLINE_EXCEEDED and %d were refused RESOURCE_EXHAUSTED, want at least 8 held (the client's share) and the others beyond it refused", reflection, refused)
	}
	// Every held stream's handler returns, and the connection closes: the
	// held streams keep nothing running.
	for _, p := range paths {
		f.WaitServed(t, p, perPath)
	}
	c.Conn.Close()
	f.WaitClosed(t, 1)
}

// TestHeldStreamsPerUID: the calls of one UID waiting for their request
// are bounded: beyond the limit they are refused at once, without waiting
// for the read timeout (an hour here); once the held streams end, calls
// are served again.
func TestHeldStreamsPerUID(t *testing.T) {
	const limit, held = 10, 30
	f := start(t, server.Config{Limits: server.LimitsConfig{MaxPendingPerClient: limit}, Transport: server.TransportConfig{RequestReadTimeout: time.Hour}}, false, podstest.SamplePods()...)
	c := podstest.DialH2(t, f.Socket)
	for range held {
		c.Open("/grpc.health.v1.Health/Check")
	}
	ends, _ := c.ReadUntil(func(ends map[uint32]podstest.StreamEnd, _, _ bool) bool { return len(ends) == held-limit })
	for id, end := range ends {
		if end.Status != strconv.Itoa(int(connect.CodeResourceExhausted)) {
			t.Fatalf("held stream %d beyond the limit ended %+v, want RESOURCE_EXHAUSTED", id, end)
		}
	}
	c.Conn.Close()
	// The held streams end with their connection.
	f.WaitServed(t, "/grpc.health.v1.Health/Check", held)
	if _, err := podstest.ClientKinds[0].Dial(t, f.Socket).List(t.Context(), nil); err != nil {
		t.Fatalf("ListPods once the held streams are gone: %v", err)
	}
}

// TestHeldStreamsDenied: a denied peer's streams are refused at once,
// before their body (none comes), and its connection gets a GOAWAY and is
// closed once they end, though the read timeout is an hour.
func TestHeldStreamsDenied(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := start(t, server.Config{Hooks: podstest.AsRoot(), Registry: reg, Access: server.AccessConfig{AllowedUIDs: []uint32{4242}}, Transport: server.TransportConfig{RequestReadTimeout: time.Hour}}, false)
	c := podstest.DialH2(t, f.Socket)
	const streams = 20
	for range streams {
		c.Open("/kubelet.pods.v1alpha1.Pods/ListPods")
	}
	ends, goaway := c.ReadUntil(func(_ map[uint32]podstest.StreamEnd, _, closed bool) bool { return closed })
	if !goaway {
		t.Errorf("no GOAWAY before the connection of a denied peer was closed")
	}
	denied := 0
	for _, end := range ends {
		if end.Status == strconv.Itoa(int(connect.CodePermissionDenied)) {
			denied++
		}
	}
	// Streams opened after the GOAWAY are ignored by the server.
	if denied == 0 {
		t.Fatalf("streams ended %v, want PERMISSION_DENIED", ends)
	}
	if got := podstest.MetricValue(t, reg, "podsapi_peer_denied_total", nil); got != float64(denied) {
		t.Errorf("podsapi_peer_denied_total = %v, want %d", got, denied)
	}
}

// TestSlowPrefacesShed fills every connection slot with connections that
// never send their preface: a real client still connects, by taking the
// slot of the oldest of them, which is closed.
func TestSlowPrefacesShed(t *testing.T) {
	const slots = 4
	reg := prometheus.NewRegistry()
	f := start(t, server.Config{Registry: reg, Limits: server.LimitsConfig{MaxConnections: slots}}, false, podstest.SamplePods()...)
	var silent []net.Conn
	for range slots {
		c, err := net.Dial("unix", f.Socket)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(podstest.Deadline(t))
		silent = append(silent, c)
	}
	f.WaitAccepted(t, slots)
	if got := podstest.GaugeValue(t, reg, "podsapi_connections_open"); got != slots {
		t.Fatalf("podsapi_connections_open = %v with %d silent connections accepted", got, slots)
	}
	for i := range 3 {
		if _, err := podstest.ClientKinds[0].Dial(t, f.Socket).List(t.Context(), nil); err != nil {
			t.Fatalf("client %d with every slot held by silent connections: %v", i, err)
		}
	}
	// The three oldest silent connections were shed, oldest first.
	for i, c := range silent[:3] {
		if err := drain(c); err != nil {
			t.Fatalf("silent connection %d not closed: %v", i, err)
		}
	}
	if got := podstest.MetricValue(t, reg, "podsapi_connections_shed_total", nil); got != 3 {
		t.Errorf("podsapi_connections_shed_total = %v, want 3", got)
	}
	// One more connection takes the slot of the last silent one, not of a
	// client that made a call.
	podstest.RawH2(t, f.Socket)
	if err := drain(silent[3]); err != nil {
		t.Fatalf("last silent connection not closed: %v", err)
	}
	if got := podstest.MetricValue(t, reg, "podsapi_connections_rejected_total", nil); got != 0 {
		t.Errorf("podsapi_connections_rejected_total = %v, want 0 while silent connections could be shed", got)
	}
}

// TestWatchersPerUID: one UID cannot open more than its share of watches.
func TestWatchersPerUID(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := start(t, server.Config{Registry: reg, Limits: server.LimitsConfig{MaxWatchers: 100, MaxWatchersPerClient: 3}}, false, podstest.SamplePods()...)
	c := podstest.ClientKinds[0].Dial(t, f.Socket)
	wctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for range 3 {
		w, err := c.Watch(wctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		podstest.Recv(t, w)
	}
	w, err := c.Watch(t.Context(), nil)
	if err == nil {
		_, err = w.Recv()
	}
	if podstest.ErrorCode(err) != connect.CodeResourceExhausted || !strings.Contains(podstest.ErrorMessage(err), "per client") {
		t.Fatalf("watch beyond the share of one UID: %v, want ResourceExhausted naming the per-client limit", err)
	}
	cancel()
	// The three cancelled watches and the refused one, served to the end.
	f.WaitServed(t, podsv1alpha1connect.PodsWatchPodsProcedure, 4)
	if got := podstest.GaugeValue(t, reg, "podsapi_watches_open"); got != 0 {
		t.Fatalf("podsapi_watches_open = %v once every watch ended, want 0", got)
	}
	w, err = c.Watch(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	podstest.Recv(t, w)
}

// TestFrameFloods sends the floods net/http lets through on its own: empty
// CONTINUATION frames without end, and Rapid Reset (calls reset as soon as
// sent, which its handlers keep up with). The connection is closed and
// counted by reason; another client is served meanwhile.
func TestFrameFloods(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		flood        func(c *podstest.H2Client) error
	}{
		{"empty CONTINUATION frames", "continuation", func(c *podstest.H2Client) error {
			block := c.Headers("/grpc.health.v1.Health/Check")
			if err := c.Write(func(fr *http2.Framer) error {
				return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block})
			}); err != nil {
				return err
			}
			for range 100000 {
				if err := c.Write(func(fr *http2.Framer) error { return fr.WriteContinuation(1, false, nil) }); err != nil {
					return err
				}
			}
			return nil
		}},
		{"Rapid Reset", "rapid_reset", func(c *podstest.H2Client) error {
			for id := uint32(1); id < 200000; id += 2 {
				if err := c.OpenErr("/grpc.health.v1.Health/Check", id); err != nil {
					return err
				}
				if err := c.Write(func(fr *http2.Framer) error {
					if err := fr.WriteData(id, true, podstest.Envelope(0, nil)); err != nil {
						return err
					}
					return fr.WriteRSTStream(id, http2.ErrCodeCancel)
				}); err != nil {
					return err
				}
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			f := start(t, server.Config{Registry: reg}, false, podstest.SamplePods()...)
			c := podstest.DialH2(t, f.Socket)
			flooded := make(chan error, 1)
			go func() { flooded <- tc.flood(c) }()
			c.ReadUntil(func(_ map[uint32]podstest.StreamEnd, _, closed bool) bool { return closed })
			if err := <-flooded; err == nil {
				t.Fatalf("the whole flood was sent: the connection was not closed")
			}
			if got := podstest.MetricValue(t, reg, "podsapi_connections_flood_closed_total", map[string]string{"reason": tc.reason}); got != 1 {
				t.Errorf("podsapi_connections_flood_closed_total{reason=%q} = %v, want 1", tc.reason, got)
			}
			if _, err := podstest.ClientKinds[0].Dial(t, f.Socket).List(t.Context(), nil); err != nil {
				t.Fatalf("ListPods after the flood: %v", err)
			}
		})
	}
}

// TestDeniedConnectionShare: a peer denied the API keeps at most
// DefaultMaxDeniedConnections connections (health needs one); more are
// closed as soon as accepted, and closing one makes room.
func TestDeniedConnectionShare(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := start(t, server.Config{Hooks: podstest.AsRoot(), Registry: reg, Access: server.AccessConfig{AllowedUIDs: []uint32{4242}}}, false)
	var held []*podstest.H2Client
	for range server.DefaultMaxDeniedConnections {
		held = append(held, podstest.DialH2(t, f.Socket)) // each reads the server's SETTINGS
	}
	extra := podstest.RawH2(t, f.Socket)
	if frames := podstest.ReadFrames(t, extra); len(frames) != 0 {
		t.Fatalf("a denied peer's connection beyond its share got %d frames, want to be closed at once", len(frames))
	}
	if got := podstest.MetricValue(t, reg, "podsapi_connections_rejected_total", nil); got != 1 {
		t.Errorf("podsapi_connections_rejected_total = %v, want 1", got)
	}
	held[0].Conn.Close()
	// The refused connection and the one the client closed.
	f.WaitClosed(t, 2)
	if got := podstest.GaugeValue(t, reg, "podsapi_connections_open"); got != server.DefaultMaxDeniedConnections-1 {
		t.Fatalf("podsapi_connections_open = %v once one was closed, want %d", got, server.DefaultMaxDeniedConnections-1)
	}
	podstest.DialH2(t, f.Socket)
}

// TestAdvertisedSettings: the server advertises the protocol's initial
// windows and its smallest frames, enough for requests of at most 4 KiB, so
// that a client cannot have it buffer
// net/http's default 1 MiB per connection that no handler reads.
func TestAdvertisedSettings(t *testing.T) {
	f := start(t, server.Config{}, false, podstest.SamplePods()...)
	conn, err := net.Dial("unix", f.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(podstest.Deadline(t))
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	// The answer to this PING comes after every frame the server sends
	// when a connection starts.
	if err := fr.WritePing(false, [8]byte{1}); err != nil {
		t.Fatal(err)
	}
	settings := map[http2.SettingID]uint32{}
	var connWindowRaise uint32
	for {
		fm, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		switch fm := fm.(type) {
		case *http2.SettingsFrame:
			if !fm.IsAck() {
				fm.ForeachSetting(func(s http2.Setting) error { settings[s.ID] = s.Val; return nil })
				if err := fr.WriteSettingsAck(); err != nil {
					t.Fatal(err)
				}
			}
		case *http2.WindowUpdateFrame:
			if fm.StreamID == 0 {
				connWindowRaise += fm.Increment
			}
		}
		if p, ok := fm.(*http2.PingFrame); ok && p.IsAck() {
			break
		}
	}
	for _, want := range []struct {
		id  http2.SettingID
		val uint32
	}{
		{http2.SettingInitialWindowSize, 65535},
		{http2.SettingMaxFrameSize, 16 << 10},
		{http2.SettingMaxConcurrentStreams, server.DefaultMaxStreams},
	} {
		if got, ok := settings[want.id]; !ok || got != want.val {
			t.Errorf("%v = %d (sent %v), want %d", want.id, got, ok, want.val)
		}
	}
	if connWindowRaise != 0 {
		t.Errorf("the server raised the connection's window by %d; want the protocol's 65,535 bytes", connWindowRaise)
	}
}

// TestSnapshotFrameSize watches over a raw HTTP/2 connection that grants
// every byte the server may send and allows frames of 1 MiB: the shared
// snapshot, about 100 KiB, must arrive in DATA frames no larger than 16 KiB
// (grpc-go's largest), because net/http keeps, for the life of the
// connection, a write buffer as large as the largest frame it wrote there.
func TestSnapshotFrameSize(t *testing.T) {
	var pods []*corev1.Pod
	for i := range 25 {
		pods = append(pods, podstest.Pod("default", fmt.Sprintf("p-%02d", i), i))
	}
	f := start(t, server.Config{}, false, pods...)
	c := podstest.DialH2(t, f.Socket, http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 20})
	req, err := proto.Marshal(&podsv1alpha1.PodWatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	id := c.Open(podsv1alpha1connect.PodsWatchPodsProcedure)
	if err := c.Write(func(fr *http2.Framer) error { return fr.WriteData(id, true, podstest.Envelope(0, req)) }); err != nil {
		t.Fatal(err)
	}
	r := &h2DataReader{c: c, id: id}
	events, snapshot := 0, 0 // ADDED events, and bytes up to INITIAL_SYNC_COMPLETE
	for {
		msg, err := podstest.ReadEnvelope(r)
		if err != nil {
			t.Fatalf("after %d events: %v", events, err)
		}
		snapshot += len(msg)
		ev := &podsv1alpha1.PodWatchResponse{}
		if err := proto.Unmarshal(msg[5:], ev); err != nil {
			t.Fatalf("event %d: %v", events, err)
		}
		if ev.GetType() == podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE {
			break
		}
		events++
	}
	if events != len(pods) {
		t.Errorf("%d ADDED events before INITIAL_SYNC_COMPLETE, want %d", events, len(pods))
	}
	if snapshot < 64<<10 {
		t.Fatalf("the snapshot is %d bytes: too small to tell 16 KiB writes from larger ones", snapshot)
	}
	if r.largest > 16<<10 {
		t.Errorf("largest DATA frame: %d bytes, want at most 16384 (snapshot of %d bytes)", r.largest, snapshot)
	}
}

// h2DataReader reads the response body of stream id of a raw connection:
// it grants back every byte it receives, answers pings, and records the
// largest DATA frame.
type h2DataReader struct {
	c       *podstest.H2Client
	id      uint32
	buf     []byte // received, not yet read
	largest int
}

func (r *h2DataReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		fm, err := r.c.Fr.ReadFrame()
		if err != nil {
			return 0, err
		}
		switch fm := fm.(type) {
		case *http2.DataFrame:
			if fm.StreamID != r.id {
				continue
			}
			n := len(fm.Data())
			r.largest = max(r.largest, n)
			r.buf = append(r.buf, fm.Data()...)
			if n > 0 {
				if err := r.c.Write(func(fr *http2.Framer) error {
					if err := fr.WriteWindowUpdate(0, uint32(n)); err != nil {
						return err
					}
					return fr.WriteWindowUpdate(r.id, uint32(n))
				}); err != nil {
					return 0, err
				}
			}
		case *http2.MetaHeadersFrame:
			if fm.StreamID == r.id && fm.StreamEnded() {
				return 0, fmt.Errorf("the stream ended: %v", fm.Fields)
			}
		case *http2.PingFrame:
			if !fm.IsAck() {
				if err := r.c.Write(func(fr *http2.Framer) error { return fr.WritePing(true, fm.Data) }); err != nil {
					return 0, err
				}
			}
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// start serves pods from a fresh store over a real socket, the one way
// tests start a server (podstest.Serve), synced unless unsynced is set.
func start(t *testing.T, cfg server.Config, unsynced bool, pods ...*corev1.Pod) *podstest.Fixture {
	t.Helper()
	return podstest.Serve(t, podstest.NewStore(nil, unsynced, pods...), cfg)
}
