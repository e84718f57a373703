package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/test/podstest"
)

// runUntilServing runs the command with args until the end of the test and
// returns a connection to its socket once its health says SERVING.
func runUntilServing(t *testing.T, sock string, args ...string) *grpc.ClientConn {
	t.Helper()
	conn, _ := runServing(t, sock, true, args...)
	return conn
}

// runServing is runUntilServing that also returns the command's logs; unless
// untilServing, it returns as soon as the health service answers, serving
// or not.
func runServing(t *testing.T, sock string, untilServing bool, args ...string) (*grpc.ClientConn, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stderr := new(syncBuffer)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, append(args, "--socket", sock, "--metrics-address", ""), &bytes.Buffer{}, stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run %v: %v", args, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("Run %v did not return within 30 s of its context ending", args)
		}
	})
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	conn := podstest.GRPCConn(t, sock)
	waitHealth(wctx, t, conn, stderr, untilServing)
	return conn, stderr
}

// TestRunChained chains two servers: the second reads the first's kubelet
// wire with --source=kubelet-grpc, as it would read a kubelet, and serves the
// same pods.
func TestRunChained(t *testing.T) {
	firstSocket := podstest.SocketPath(t)
	first := runUntilServing(t, firstSocket, "--manifest-dir", "../../examples/manifests", "--node-name", "node-1")
	second := runUntilServing(t, podstest.SocketPath(t), "--source", "kubelet-grpc", "--source-socket", firstSocket)
	want, got := &podsv1alpha1.PodListResponse{}, &podsv1alpha1.PodListResponse{}
	if err := first.Invoke(t.Context(), podsv1alpha1connect.PodsListPodsProcedure, &podsv1alpha1.PodListRequest{}, want); err != nil {
		t.Fatal(err)
	}
	if err := second.Invoke(t.Context(), podsv1alpha1connect.PodsListPodsProcedure, &podsv1alpha1.PodListRequest{}, got); err != nil {
		t.Fatal(err)
	}
	// Each server has its own revisions: compare the pods.
	if want.GetRevision() == "" || got.GetRevision() == "" || want.GetRevision() == got.GetRevision() {
		t.Errorf("revisions %q and %q: want two distinct ones", want.GetRevision(), got.GetRevision())
	}
	want.Revision, got.Revision = "", ""
	if len(want.GetPods()) == 0 || !proto.Equal(got, want) {
		t.Errorf("the chained server lists %d pods, the first %d, or they differ", len(got.GetPods()), len(want.GetPods()))
	}
}
