package main

import (
	"net"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/kubelet/pkg/apis/pods/v1alpha1"
)

// TestKubeletShutdownHint watches a grpc-go server that ends the watch as a
// v1.37 kubelet does when it shuts down (its listener closed, then
// RESOURCE_EXHAUSTED "watch client channel closed"): podsctl says the
// server went away, not that it fell behind.
func TestKubeletShutdownHint(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "k.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		if err := stream.RecvMsg(new(v1alpha1.WatchPodsRequest)); err != nil {
			return err
		}
		if err := stream.SendMsg(&v1alpha1.WatchPodsEvent{Type: v1alpha1.EventType_INITIAL_SYNC_COMPLETE}); err != nil {
			return err
		}
		l.Close() // as GracefulStop does first
		return status.Error(codes.ResourceExhausted, "watch client channel closed")
	}))
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Stop(); <-served })

	_, stderr, code := run(t, "watch", "--once", "--wire", "kubelet", "--socket", socket)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr %q", code, stderr)
	}
	for _, want := range []string{"RESOURCE_EXHAUSTED", "hint: the server went away"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q does not contain %q", stderr, want)
		}
	}
	if strings.Contains(stderr, "fell behind") {
		t.Errorf("stderr %q says podsctl fell behind", stderr)
	}
}
