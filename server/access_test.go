package server_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/test/podstest"
)

// logBuffer is a concurrency-safe log sink.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestPeerDenied is seen as root (asRoot), whatever the test's user, with
// only UID 4242 allowed: every call of the Pods API and reflection is
// PERMISSION_DENIED, health still answers, each
// denied call is counted and the denials are logged once per UID and interval.
func TestPeerDenied(t *testing.T) {
	reg := prometheus.NewRegistry()
	logs := &logBuffer{}
	pods := podstest.SamplePods()
	f := start(t, server.Config{
		Hooks:    podstest.AsRoot(),
		Registry: reg,
		Logger:   slog.New(slog.NewTextHandler(logs, nil)),
		Access:   server.AccessConfig{AllowedUIDs: []uint32{4242}},
	}, false, pods...)

	calls := 0
	for _, kind := range podstest.ClientKinds {
		c := kind.Dial(t, f.socket)
		_, err := c.List(ctx(t), nil)
		check := func(name string, err error) {
			t.Helper()
			calls++
			if podstest.ErrorCode(err) != connect.CodePermissionDenied || !strings.Contains(podstest.ErrorMessage(err), "uid 0") {
				t.Fatalf("%s %s: %v, want PermissionDenied naming uid 0", kind.Name, name, err)
			}
		}
		check("ListPods", err)
		_, err = c.Get(ctx(t), string(pods[0].UID), nil)
		check("GetPod", err)
		w, err := c.Watch(ctx(t), nil)
		if err == nil {
			_, err = w.Recv()
		}
		check("WatchPods", err)
	}

	conn := podstest.GRPCConn(t, f.socket)
	stream, err := grpc_reflection_v1.NewServerReflectionClient(conn).ServerReflectionInfo(ctx(t))
	if err == nil {
		// Send reports io.EOF when the server has already ended the stream;
		// the status comes from Recv either way.
		if err = stream.Send(&grpc_reflection_v1.ServerReflectionRequest{
			MessageRequest: &grpc_reflection_v1.ServerReflectionRequest_ListServices{},
		}); err == nil || errors.Is(err, io.EOF) {
			_, err = stream.Recv()
		}
	}
	if podstest.ErrorCode(err) != connect.CodePermissionDenied {
		t.Fatalf("reflection: %v, want PermissionDenied", err)
	}
	calls++
	resp, err := healthpb.NewHealthClient(conn).Check(ctx(t), &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health of a denied peer: %v, %v; want SERVING (health stays open)", resp.GetStatus(), err)
	}

	if got := podstest.MetricValue(t, reg, "podsapi_peer_denied_total", nil); got != float64(calls) {
		t.Errorf("podsapi_peer_denied_total = %v, want %d", got, calls)
	}
	// One log line for the UID, however many connections and calls: the
	// others are suppressed for guard.PeerLogInterval.
	lines := strings.Count(logs.String(), "denied a client")
	if lines != 1 {
		t.Errorf("%d denial log lines for one denied UID, want 1:\n%s", lines, logs)
	}
	if want := fmt.Sprintf("uid=0 gid=0 pid=%d", os.Getpid()); !strings.Contains(logs.String(), want) {
		t.Errorf("denial logs do not name the peer (%s):\n%s", want, logs)
	}
}

// TestPeerAllowedByGroup allows the group 0 only: root (asRoot), whose
// group is 0, is served.
func TestPeerAllowedByGroup(t *testing.T) {
	f := start(t, server.Config{Hooks: podstest.AsRoot(), Access: server.AccessConfig{AllowedUIDs: []uint32{4242}, AllowedGIDs: []uint32{0}}}, false, podstest.SamplePods()...)
	for _, kind := range podstest.ClientKinds {
		if got, err := kind.Dial(t, f.socket).List(ctx(t), nil); err != nil || len(got) != 3 {
			t.Fatalf("%s: ListPods allowed by group: %d pods, %v", kind.Name, len(got), err)
		}
	}
}

// TestAllowAnyPeer turns the check off.
func TestAllowAnyPeer(t *testing.T) {
	f := start(t, server.Config{Access: server.AccessConfig{AllowedUIDs: []uint32{4242}, AllowAnyPeer: true}}, false, podstest.SamplePods()...)
	if _, err := podstest.ClientKinds[0].Dial(t, f.socket).List(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
}

// TestSocketGroup serves on a socket of mode 0660 owned by a group, in a
// directory the server creates 0750 with that group: as root, a group no
// user has; as any other user, one of its own groups (podstest.SocketGroup).
// The client is seen as root (asRoot), whom the default access allows.
func TestSocketGroup(t *testing.T) {
	gid := podstest.SocketGroup(t)
	dir := filepath.Dir(podstest.SocketPath(t))
	sock := filepath.Join(dir, "sub", "pods.sock")
	f := start(t, server.Config{Socket: sock, Hooks: podstest.AsRoot(), Access: server.AccessConfig{SocketGroup: strconv.Itoa(gid)}}, false, podstest.SamplePods()...)
	for path, mode := range map[string]os.FileMode{sock: 0o660, filepath.Dir(sock): 0o750} {
		info, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		st := info.Sys().(*syscall.Stat_t)
		if info.Mode().Perm() != mode || st.Gid != uint32(gid) {
			t.Errorf("%s: mode %v gid %d, want %v and gid %d", path, info.Mode().Perm(), st.Gid, mode, gid)
		}
	}
	if _, err := podstest.ClientKinds[0].Dial(t, f.socket).List(ctx(t), nil); err != nil {
		t.Fatal(err)
	}
}
