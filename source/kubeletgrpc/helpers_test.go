package kubeletgrpc_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/source/kubeletgrpc"
	"github.com/podsapi/podsapi/test/sourcetest"
)

// harness runs a Source against a socket until the test ends.
type harness struct {
	rec  *sourcetest.Recorder
	reg  *prometheus.Registry
	logs *sourcetest.Logs
}

// socketPath returns a socket path in a new temporary directory, short
// enough for a UNIX socket.
func socketPath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, "kubelet.sock")
}

// start runs a Source on socket, with fast backoff unless opts say
// otherwise, and stops it when the test ends.
func start(t *testing.T, socket string, opts ...kubeletgrpc.Option) *harness {
	t.Helper()
	h := &harness{rec: sourcetest.NewRecorder(), reg: prometheus.NewRegistry(), logs: sourcetest.NewLogs(t)}
	src := kubeletgrpc.New(append([]kubeletgrpc.Option{
		kubeletgrpc.WithSocket(socket),
		kubeletgrpc.WithLogger(h.logs.Logger()),
		kubeletgrpc.WithRegisterer(h.reg),
		kubeletgrpc.WithBackoff(time.Millisecond, 5*time.Millisecond),
	}, opts...)...)
	sourcetest.Run(t, func(ctx context.Context) error { return src.Run(ctx, h.rec) })
	return h
}

// errors returns podsapi_source_errors_total for reason.
func (h *harness) errors(t *testing.T, reason string) float64 {
	t.Helper()
	return sourcetest.SourceErrors(t, h.reg, "kubelet-grpc", reason)
}

// inPhase returns a match function for Recorder.WaitPods.
func inPhase(phases map[string]corev1.PodPhase) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		want, ok := phases[p.Name]
		return !ok || p.Status.Phase == want
	}
}

// since returns the calls after the first n.
func since(s sourcetest.State, n int) []sourcetest.Call { return s.Calls[n:] }
