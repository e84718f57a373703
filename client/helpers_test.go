package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/client"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// testTimeout bounds every wait of these tests.
const testTimeout = 20 * time.Second

// testCtx returns a context bounded by testTimeout, cancelled at the end of
// the test.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// samplePods returns three pods, in the order the server lists them.
func samplePods() []*corev1.Pod {
	return []*corev1.Pod{
		podstest.Pod("default", "web-1", 1),
		podstest.Pod("default", "web-2", 2),
		podstest.Pod("kube-system", "dns-0", 3),
	}
}

// newStore returns a store holding pods, synced unless unsynced.
func newStore(unsynced bool, pods ...*corev1.Pod) *store.Store {
	st := store.New()
	for _, p := range pods {
		st.Upsert(p)
	}
	if !unsynced {
		st.MarkSynced()
	}
	return st
}

// startClient starts a server of st with cfg and returns a client of it,
// both stopped at the end of the test.
func startClient(t *testing.T, st *store.Store, cfg server.Config) *client.Client {
	t.Helper()
	srv := podstest.Start(t, st, cfg)
	return dial(t, srv.SocketPath())
}

// dial returns a client of socket, closed at the end of the test.
func dial(t *testing.T, socket string) *client.Client {
	t.Helper()
	c, err := client.New(socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// runningServer is a server started by serve, for the tests that stop and
// restart servers on one socket.
type runningServer struct {
	socket string
	f      *podstest.Fixture
}

// serve starts a server of st on socket, the one way tests start one
// (podstest.Serve). Stop it with stop; it is also stopped at the end of the
// test.
func serve(t *testing.T, st *store.Store, socket string) *runningServer {
	t.Helper()
	f := podstest.Serve(t, st, server.Config{Socket: socket, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return &runningServer{socket: socket, f: f}
}

// stop stops the server and waits until it has shut down. Further calls do
// nothing.
func (s *runningServer) stop(t *testing.T) {
	t.Helper()
	s.f.Stop()
}

// podDiff returns "" when got is semantically equal to want, ignoring
// want's TypeMeta, which the wire format does not carry; otherwise the first
// differing line of their JSON forms.
func podDiff(got, want *corev1.Pod) string {
	if got == nil || want == nil {
		if got == want {
			return ""
		}
		return fmt.Sprintf("got %v, want %v", got, want)
	}
	w := want.DeepCopy()
	w.TypeMeta = metav1.TypeMeta{}
	if equality.Semantic.DeepEqual(got, w) {
		return ""
	}
	gj, _ := json.MarshalIndent(got, "", " ")
	wj, _ := json.MarshalIndent(w, "", " ")
	gl, wl := strings.Split(string(gj), "\n"), strings.Split(string(wj), "\n")
	for i := range min(len(gl), len(wl)) {
		if gl[i] != wl[i] {
			return fmt.Sprintf("pod %s/%s differs at JSON line %d: got %s, want %s", want.Namespace, want.Name, i+1, gl[i], wl[i])
		}
	}
	return fmt.Sprintf("pod %s/%s differs: %d JSON lines, want %d", want.Namespace, want.Name, len(gl), len(wl))
}
