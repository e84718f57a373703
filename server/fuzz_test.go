package server_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/podsapi/podsapi/internal/h2c"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/test/podstest"
)

// recordingHandler is a slog handler that keeps the records a client must
// never cause: errors, and the panics net/http recovers and reports through
// the server's ErrorLog (at debug level).
type recordingHandler struct {
	mu  *sync.Mutex
	bad *[]string
}

func (h recordingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h recordingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError || strings.Contains(r.Message, "panic") {
		h.mu.Lock()
		*h.bad = append(*h.bad, r.Level.String()+" "+r.Message)
		h.mu.Unlock()
	}
	return nil
}

func (h recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordingHandler) WithGroup(string) slog.Handler      { return h }

// fuzzProcedures are the paths FuzzRequest calls, by index.
var fuzzProcedures = []string{
	"/kubelet.pods.v1alpha1.Pods/ListPods",
	"/kubelet.pods.v1alpha1.Pods/GetPod",
	"/kubelet.pods.v1alpha1.Pods/WatchPods",
	"/grpc.health.v1.Health/Check",
	"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
	"/kubelet.pods.v1alpha1.Pods/Nope",
	"/",
}

// fuzzContentTypes are the content types FuzzRequest sends, by index.
var fuzzContentTypes = []string{
	"application/grpc", "application/grpc+proto", "application/grpc+json", "application/grpc-web+proto",
	"application/proto", "application/json", "application/connect+proto", "text/plain", "",
}

// FuzzRequest sends arbitrary requests to every procedure of a real server
// on a real socket, over HTTP/2 and HTTP/1.1: bodies (gRPC length prefixes
// included), content types, a header of the fuzzer's choice (field masks
// among them). Every request must get a well-formed answer (a gRPC status
// that is not UNKNOWN for gRPC), the server must never panic or log an
// error, and it must still serve afterwards.
func FuzzRequest(f *testing.F) {
	pods := podstest.SamplePods()
	uid := []byte(pods[0].UID)
	getReq := append([]byte{0x0a, byte(len(uid))}, uid...)
	for proc := range fuzzProcedures {
		for _, ct := range []uint8{0, 4, 5} {
			f.Add(uint8(proc), ct, false, "", "", podstest.Envelope(0, nil))
		}
	}
	f.Add(uint8(1), uint8(0), false, "", "", podstest.Envelope(0, getReq))
	f.Add(uint8(1), uint8(5), true, "", "", []byte(`{"podUID":"`+string(uid)+`"}`))
	f.Add(uint8(0), uint8(0), false, "x-kubernetes-fieldmask", "metadata.name,status.phase", podstest.Envelope(0, nil))
	f.Add(uint8(2), uint8(0), false, "x-kubernetes-fieldmask", "status.phase", podstest.Envelope(0, nil))
	f.Add(uint8(0), uint8(0), false, "x-kubernetes-fieldmask", "metadata.labels.app", podstest.Envelope(0, nil))
	f.Add(uint8(0), uint8(0), false, "x-kubernetes-fieldmask-bin", "CgxzdGF0dXMucGhhc2U", podstest.Envelope(0, nil))
	f.Add(uint8(0), uint8(0), false, "x-kubernetes-fieldmask-bin", "%%%", podstest.Envelope(0, nil))
	f.Add(uint8(0), uint8(0), false, "grpc-encoding", "gzip", podstest.Envelope(1, []byte("not gzip")))
	f.Add(uint8(0), uint8(0), false, "grpc-timeout", "1n", podstest.Envelope(0, nil))
	f.Add(uint8(0), uint8(0), false, "grpc-timeout", "99999999999H", podstest.Envelope(0, nil))
	f.Add(uint8(1), uint8(0), false, "", "", podstest.Envelope(1, getReq))
	f.Add(uint8(1), uint8(0), false, "", "", []byte{0, 0xff, 0xff, 0xff, 0xff, 1, 2})
	f.Add(uint8(1), uint8(0), false, "", "", []byte{0, 0, 0, 0x20, 0, 1})
	f.Add(uint8(1), uint8(0), false, "", "", podstest.Envelope(0, bytes.Repeat([]byte{0x0a, 0x01, 'x'}, 2000)))
	f.Add(uint8(1), uint8(0), false, "", "", append(podstest.Envelope(0, getReq), podstest.Envelope(0, getReq)...))
	f.Add(uint8(1), uint8(0), false, "", "", []byte{0x80, 0, 0, 0, 0})
	f.Add(uint8(1), uint8(0), false, "", "", []byte{0x0a, 0xff, 0xff})
	f.Add(uint8(3), uint8(0), false, "", "", podstest.Envelope(0, []byte{0x0a, 0x80}))
	f.Add(uint8(4), uint8(0), false, "", "", podstest.Envelope(0, []byte{0x3a, 0x00}))
	f.Add(uint8(1), uint8(5), true, "", "", []byte(`{"podUID":`))
	f.Add(uint8(1), uint8(5), true, "connect-protocol-version", "2", []byte(`{}`))
	f.Add(uint8(0), uint8(8), true, "", "", []byte("GET / HTTP/1.1\r\n\r\n"))
	// Selectors, resume and progress marks (issue 16).
	f.Add(uint8(0), uint8(0), false, "", "", podstest.Envelope(0, []byte("\x0a\x07default\x12\x08tier=web\x1a\x13status.phase!=Ready")))
	f.Add(uint8(0), uint8(0), false, "", "", podstest.Envelope(0, []byte("\x12\x09tier in (")))
	f.Add(uint8(0), uint8(0), false, "", "", podstest.Envelope(0, []byte("\x1a\x0cspec.x=y,a=b")))
	f.Add(uint8(2), uint8(0), false, "", "", podstest.Envelope(0, []byte("\x12\x05!tier\x22\x03x.1\x28\x01")))
	f.Add(uint8(2), uint8(0), false, "", "", podstest.Envelope(0, []byte("\x22\x130123456789abcdef.99\x28\x01")))
	f.Add(uint8(2), uint8(5), true, "", "", []byte(`{"labelSelector":"tier=web","progressNotify":true}`))

	var mu sync.Mutex
	var bad []string
	var calls atomic.Int64
	st := storeWith(pods...)
	srv := podstest.Start(f, st, server.Config{
		Logger: slog.New(recordingHandler{mu: &mu, bad: &bad}),
		Limits: server.LimitsConfig{QPS: -1},
	})
	h2 := h2c.NewClient(srv.SocketPath())
	h1 := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", srv.SocketPath())
		},
	}}
	f.Cleanup(func() {
		h2.CloseIdleConnections()
		h1.CloseIdleConnections()
	})
	checkLogs := func(t *testing.T) {
		mu.Lock()
		defer mu.Unlock()
		if len(bad) > 0 {
			t.Fatalf("the server logged %q", bad)
		}
	}

	f.Fuzz(func(t *testing.T, proc, ct uint8, http1 bool, key, value string, body []byte) {
		path := fuzzProcedures[int(proc)%len(fuzzProcedures)]
		contentType := fuzzContentTypes[int(ct)%len(fuzzContentTypes)]
		timeout := 5 * time.Second
		if strings.HasSuffix(path, "/WatchPods") {
			timeout = 100 * time.Millisecond // a valid watch streams until cancelled
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, h2c.BaseURL+path, bytes.NewReader(body))
		if err != nil {
			return
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		if strings.HasPrefix(contentType, "application/grpc") {
			req.Header.Set("TE", "trailers")
		}
		if key != "" {
			req.Header.Add(key, value)
		}
		client := h2
		if http1 {
			client = h1
		}
		resp, err := client.Do(req)
		if err != nil {
			if ctx.Err() != nil && timeout < time.Second {
				return
			}
			// The client refuses to send some headers (invalid names or
			// values, reserved pseudo-headers): nothing reached the server.
			if strings.Contains(err.Error(), "invalid") || strings.Contains(err.Error(), "net/http:") {
				return
			}
			t.Fatalf("%s %q: no answer: %v", path, contentType, err)
		}
		answer, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if rerr != nil && ctx.Err() == nil {
			t.Fatalf("%s %q: reading the answer: %v", path, contentType, rerr)
		}
		// Connect protocol errors carry their code in a JSON body.
		if resp.StatusCode != http.StatusOK && bytes.Contains(answer, []byte(`"code":"unknown"`)) {
			t.Fatalf("%s %q: %s %s: not a deliberate code", path, contentType, resp.Status, answer)
		}
		if rct := resp.Header.Get("Content-Type"); rerr == nil && resp.StatusCode == http.StatusOK &&
			(rct == "application/grpc" || strings.HasPrefix(rct, "application/grpc+")) {
			status := resp.Trailer.Get("Grpc-Status")
			if status == "" {
				status = resp.Header.Get("Grpc-Status")
			}
			code, err := strconv.Atoi(status)
			if err != nil || code < 0 || code > 16 {
				t.Fatalf("%s %q: grpc-status %q is not a status", path, contentType, status)
			}
			if code == 2 {
				t.Fatalf("%s %q: grpc-status UNKNOWN (%s): not a deliberate code", path, contentType, resp.Trailer.Get("Grpc-Message"))
			}
		}
		checkLogs(t)
		// The server still serves a well-formed request.
		if n := calls.Add(1); n%64 == 1 {
			req, _ := http.NewRequest(http.MethodPost, h2c.BaseURL+fuzzProcedures[0], bytes.NewReader(podstest.Envelope(0, nil)))
			req.Header.Set("Content-Type", "application/grpc")
			resp, err := h2.Do(req)
			if err != nil {
				t.Fatalf("the server stopped serving: %v", err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if s := resp.Trailer.Get("Grpc-Status"); s != "0" {
				t.Fatalf("ListPods after %d requests: grpc-status %q", n, s)
			}
		}
	})

}
