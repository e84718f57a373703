package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/socket"
	"github.com/podsapi/podsapi/test/podstest"
)

// syncBuffer is a bytes.Buffer safe for the server's concurrent logging,
// which a test can wait on for a line.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
	// written is closed, and replaced, by every Write.
	written chan struct{}
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written != nil {
		close(s.written)
		s.written = nil
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// wait waits until the buffer holds substr, woken by each write, and
// reports whether it did before ctx ended.
func (s *syncBuffer) wait(ctx context.Context, substr string) bool {
	for {
		s.mu.Lock()
		if strings.Contains(s.b.String(), substr) {
			s.mu.Unlock()
			return true
		}
		if s.written == nil {
			s.written = make(chan struct{})
		}
		written := s.written
		s.mu.Unlock()
		select {
		case <-written:
		case <-ctx.Done():
			return false
		}
	}
}

// waitHealth watches the health of the server on conn until it answers
// (SERVING or not), or until it says SERVING when untilServing; logs are
// the server's, shown when the watch fails.
func waitHealth(ctx context.Context, t *testing.T, conn *grpc.ClientConn, logs *syncBuffer, untilServing bool) {
	t.Helper()
	hw, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := hw.Recv()
		if err != nil {
			t.Fatalf("health watch: %v\nlogs:\n%s", err, logs.String())
		}
		if resp.GetStatus() == healthpb.HealthCheckResponse_SERVING || !untilServing {
			return
		}
	}
}

func TestRunUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"UnknownFlag", []string{"--bogus"}, "unknown flag: --bogus"},
		{"NotANumber", []string{"--manifest-dir", ".", "--qps", "abc"}, `invalid argument "abc" for "--qps" flag`},
		{"NoManifestDir", []string{"--socket", "/tmp/x.sock"}, "--manifest-dir is required"},
		{"ExtraArgument", []string{"--manifest-dir", ".", "extra"}, "unexpected arguments"},
		{"NegativeBurst", []string{"--manifest-dir", ".", "--burst", "-1"}, "--burst must not be negative"},
		{"NegativeShutdownTimeout", []string{"--manifest-dir", ".", "--shutdown-timeout", "-1s"}, "--shutdown-timeout must not be negative"},
		{"BadLogLevel", []string{"--manifest-dir", ".", "--log-level", "loud"}, "--log-level"},
		{"UnknownSource", []string{"--source", "etcd"}, "--source"},
		{"FlagOfAnotherSource", []string{"--manifest-dir", ".", "--kubelet-url", "http://127.0.0.1:10255/pods"}, "--kubelet-url is a flag of --source=kubelet-http"},
		{"SameSocketAsSource", []string{"--source", "kubelet-grpc", "--source-socket", "/tmp/k.sock", "--socket", "/tmp/k.sock"}, "serve on another path"},
		{"MissingKubeconfig", []string{"--source", "apiserver", "--kubeconfig", "/nonexistent/kubeconfig"}, "--kubeconfig: open /nonexistent/kubeconfig"},
		{"KubeconfigOfAnotherSource", []string{"--manifest-dir", ".", "--kubeconfig", "k"}, "--kubeconfig is a flag of --source=apiserver"},
		{"UnknownWorkloads", []string{"--manifest-dir", ".", "--workloads", "watch"}, `--workloads "watch": want derive, apiserver or off`},
		{"NegativeWorkloadRefresh", []string{"--manifest-dir", ".", "--workload-refresh", "-1s"}, "cannot be negative"},
		{"WorkloadsMissingKubeconfig", []string{"--manifest-dir", ".", "--workloads", "apiserver", "--kubeconfig", "/nonexistent/kubeconfig"}, "--workloads=apiserver: stat /nonexistent/kubeconfig"},
		{"SocketPathTooLong", []string{"--manifest-dir", ".", "--socket", "/tmp/" + strings.Repeat("s", socket.MaxPathLen-4)}, "a UNIX socket path has at most 107 bytes"},
		{"ProgressIntervalTooShort", []string{"--manifest-dir", ".", "--watch-progress-interval", "1ms"}, "--watch-progress-interval 1ms is below its minimum, 1s"},
		{"SameSocketThroughLink", []string{"--source", "kubelet-grpc", "--source-socket", sameSocketLink(t), "--socket", "/tmp/podsapi-test-absent/k.sock"}, "serve on another path"},
		{"CertWithoutKey", []string{"--source", "kubelet-http", "--kubelet-client-cert", "c.pem"}, "go together"},
		{"KubeAPIWithoutCert", []string{"--manifest-dir", ".", "--kube-api-address", "127.0.0.1:0"}, "--kube-api-address needs --kube-api-tls-cert-file"},
		{"KubeAPICertWithoutAddress", []string{"--manifest-dir", ".", "--kube-api-tls-cert-file", "c.pem"}, "need --kube-api-address"},
		{"KubeAPIClientCAOnSocket", []string{"--manifest-dir", ".", "--kube-api-socket", "/tmp/k.sock", "--kube-api-client-ca-file", "ca.pem"}, "--kube-api-client-ca-file needs --kube-api-address"},
		{"NodeViewWithoutWorkloads", []string{"--manifest-dir", ".", "--kube-api-socket", "/tmp/k.sock", "--kube-api-node-view"}, "--kube-api-node-view needs --kube-api-address or --kube-api-socket, --kube-api-shared-kinds and --workloads=apiserver"},
		{"NodeViewWithoutSharedKinds", []string{"--manifest-dir", ".", "--kube-api-socket", "/tmp/k.sock", "--workloads", "apiserver", "--kube-api-shared-kinds=false", "--kube-api-node-view=true"}, "--kube-api-node-view needs"},
		{"KubeAPINegativeTTL", []string{"--manifest-dir", ".", "--kube-api-socket", "/tmp/k.sock", "--kube-api-authentication-cache-ttl", "-1s"}, "must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr syncBuffer
			err := Run(context.Background(), tt.args, &bytes.Buffer{}, &stderr)
			var usage usageError
			if !errors.As(err, &usage) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run(%q) = %v, want a usage error containing %q", tt.args, err, tt.want)
			}
		})
	}
}

// sameSocketLink returns a symbolic link to /tmp/podsapi-test-absent/k.sock,
// a socket that does not exist.
func sameSocketLink(t *testing.T) string {
	link := filepath.Join(t.TempDir(), "k.sock")
	if err := os.Symlink("/tmp/podsapi-test-absent/k.sock", link); err != nil {
		t.Fatal(err)
	}
	return link
}

// TestRunServesExamples runs the command on the example manifests, as
// `make run` does, lists the pods, then stops it like SIGTERM would.
func TestRunServesExamples(t *testing.T) {
	sock := podstest.SocketPath(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"--manifest-dir", "../../examples/manifests", "--socket", sock, "--metrics-address", "127.0.0.1:0", "--node-name", "node-1"}, &bytes.Buffer{}, &stderr)
	}()

	// grpc-go waits for the socket to appear; health says when the pods
	// have synced.
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	conn := podstest.GRPCConn(t, sock)
	waitHealth(wctx, t, conn, &stderr, true)
	resp := &podsv1alpha1.PodListResponse{}
	if err := conn.Invoke(wctx, podsv1alpha1connect.PodsListPodsProcedure, &podsv1alpha1.PodListRequest{}, resp); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir("../../examples/manifests")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetPods()) < len(entries) {
		t.Fatalf("ListPods returned %d pods from %d manifest files", len(resp.GetPods()), len(entries))
	}
	for _, p := range resp.GetPods() {
		if p.GetSpec().GetNodeName() != "node-1" || p.GetMetadata().GetUid() == "" {
			t.Errorf("pod %s: nodeName %q, uid %q", p.GetMetadata().GetName(), p.GetSpec().GetNodeName(), p.GetMetadata().GetUid())
		}
	}

	// The probe subcommand, as the DaemonSet's liveness probe runs it.
	var out bytes.Buffer
	if err := Probe(wctx, []string{"--socket", sock, "--serving"}, &out, &syncBuffer{}); err != nil || strings.TrimSpace(out.String()) != "SERVING" {
		t.Fatalf("probe --serving: %v, printed %q; want SERVING", err, out.String())
	}
	if err := Probe(wctx, []string{"--socket", sock + ".missing"}, &out, &syncBuffer{}); err == nil {
		t.Fatal("probe of a missing socket succeeded")
	}

	// A second server on the same socket must not take it over.
	err = Run(ctx, []string{"--manifest-dir", "../../examples/manifests", "--socket", sock, "--metrics-address", ""}, &bytes.Buffer{}, &syncBuffer{})
	if !errors.Is(err, socket.ErrInUse) {
		t.Fatalf("second server on the same socket: %v, want ErrInUse", err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s of its context ending")
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket left behind: %v", err)
	}
	for _, want := range []string{"serving the Pods API", "pod sources synced", "shutting down"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, stderr.String())
		}
	}
}

// TestDeprecatedFlagNames: the per-client shares keep the names they had
// when they were per UID, as aliases of their new names.
func TestDeprecatedFlagNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"NewNames", []string{"--max-watchers-per-client", "7", "--max-pending-per-client", "9"}, "maxWatchersPerClient=7 maxPendingPerClient=9"},
		{"OldNames", []string{"--max-watchers-per-uid", "7", "--max-pending-per-uid", "9"}, "maxWatchersPerClient=7 maxPendingPerClient=9"},
		{"Defaults", nil, "maxWatchersPerClient=1000 maxPendingPerClient=256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, logs := runServing(t, podstest.SocketPath(t), false, append([]string{"--manifest-dir", "../../examples/manifests", "--node-name", "node-1"}, tc.args...)...)
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			if !logs.wait(ctx, tc.want) {
				t.Errorf("the server logged\n%s\nwant %q", logs.String(), tc.want)
			}
		})
	}
}
