package client_test

import (
	"errors"
	"net"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	"github.com/podsapi/podsapi/client"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestKubeletWatchEnd serves the kubelet's wire from a grpc-go server that
// ends a synced watch as a v1.37 kubelet does, with RESOURCE_EXHAUSTED
// "watch client channel closed" and no ErrorInfo, once while it goes on
// serving (a slow watcher dropped) and once after it stopped accepting
// connections (a kubelet shutting down: grpc-go's GracefulStop closes the
// listener first), and once by a server that goes without ending it (a
// kubelet that exits first). The first is ErrFellBehind, the others
// ErrServerGone.
func TestKubeletWatchEnd(t *testing.T) {
	for _, tc := range []struct {
		name     string
		shutdown bool
		exit     bool // the server goes without ending the stream
		want     error
	}{
		{"dropped", false, false, client.ErrFellBehind},
		{"shutdown", true, false, client.ErrServerGone},
		{"exit", true, true, client.ErrServerGone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			socket := podstest.SocketPath(t)
			l, err := net.Listen("unix", socket)
			if err != nil {
				t.Fatal(err)
			}
			end := make(chan struct{})
			var srv *grpc.Server
			srv = grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
				if err := stream.RecvMsg(new(v1alpha1.WatchPodsRequest)); err != nil {
					return err
				}
				if err := stream.SendMsg(&v1alpha1.WatchPodsEvent{Type: v1alpha1.EventType_INITIAL_SYNC_COMPLETE}); err != nil {
					return err
				}
				<-end
				if tc.shutdown {
					l.Close() // as GracefulStop does first
				}
				if tc.exit {
					go srv.Stop() // closes the connection under the stream
					<-stream.Context().Done()
					return nil
				}
				return status.Error(codes.ResourceExhausted, "watch client channel closed")
			}))
			served := make(chan struct{})
			go func() { defer close(served); _ = srv.Serve(l) }()
			t.Cleanup(func() { srv.Stop(); <-served })

			c := dialWire(t, socket, client.WireKubelet)
			w, err := c.Watch(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if ev, err := w.Next(); err != nil || ev.Type != client.Synced {
				t.Fatalf("first event %v, %v: want the sync marker", ev.Type, err)
			}
			close(end)
			_, err = w.Next()
			if (!tc.exit && connect.CodeOf(err) != connect.CodeResourceExhausted) || !errors.Is(err, tc.want) {
				t.Fatalf("the watch ended with %v, want an error wrapping %v", err, tc.want)
			}
			for _, other := range []error{client.ErrFellBehind, client.ErrServerGone} {
				if other != tc.want && errors.Is(err, other) {
					t.Errorf("%v also wraps %v", err, other)
				}
			}
		})
	}
}
