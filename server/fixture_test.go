package server_test

import (
	"context"
	"net"
	"net/http"
	"testing"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	corev1pb "github.com/podsapi/podsapi/gen/k8s.io/api/core/v1"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/internal/hooks"
	"github.com/podsapi/podsapi/internal/rigs/podstest"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/socket"
	"github.com/podsapi/podsapi/store"
)

// fixture is a real server on a real socket, fed by a store the test writes.
type fixture struct {
	store  *store.Store
	srv    *server.Server
	socket string
	*podstest.Events
}

// start serves pods from a fresh store, synced unless unsynced is set.
func start(t *testing.T, cfg server.Config, unsynced bool, pods ...*corev1.Pod) *fixture {
	t.Helper()
	return startStore(t, cfg, nil, unsynced, pods...)
}

// startWith is start for a synced store built with opts.
func startWith(t *testing.T, cfg server.Config, opts []store.Option, pods ...*corev1.Pod) *fixture {
	t.Helper()
	return startStore(t, cfg, opts, false, pods...)
}

// startStore serves pods from a store built with opts, synced unless
// unsynced, with cfg, counting the server's events.
func startStore(t *testing.T, cfg server.Config, opts []store.Option, unsynced bool, pods ...*corev1.Pod) *fixture {
	t.Helper()
	st := store.New(opts...)
	for _, p := range pods {
		st.Upsert(p)
	}
	if !unsynced {
		st.MarkSynced()
	}
	ev := withEvents(&cfg)
	srv := podstest.Start(t, st, cfg)
	return &fixture{store: st, srv: srv, socket: srv.SocketPath(), Events: ev}
}

// withEvents has the server of cfg count its events (podstest.Events),
// beside the hooks cfg already has.
func withEvents(cfg *server.Config) *podstest.Events {
	ev := podstest.NewEvents()
	h := &hooks.Hooks{}
	if cfg.Hooks != nil {
		*h = *cfg.Hooks
	}
	served, accepted, closed := h.Served, h.ConnAccepted, h.ConnClosed
	h.Served = func(r *http.Request) {
		if served != nil {
			served(r)
		}
		ev.Served(r)
	}
	h.ConnAccepted = func() {
		if accepted != nil {
			accepted()
		}
		ev.Accepted()
	}
	h.ConnClosed = func() {
		if closed != nil {
			closed()
		}
		ev.Closed()
	}
	cfg.Hooks = h
	return ev
}

// asRoot returns the hooks that have the server see every peer as root
// (uid 0, gid 0, no supplementary groups, its real pid), whatever the test's
// user, so that the access tests run as any user.
func asRoot() *hooks.Hooks {
	return &hooks.Hooks{PeerCred: func(c net.Conn) (socket.Cred, error) {
		cred, err := socket.PeerCred(c)
		cred.UID, cred.GID, cred.Groups = 0, 0, nil
		return cred, err
	}}
}

// ctx returns a context cancelled at the end of the test. It has no
// deadline: the calls and watches it bounds end with the events they wait
// for, however slow the machine (a watcher of TestSnapshotShared failed
// after 268 messages at load average 9 when it had one).
func ctx(t *testing.T) context.Context {
	return t.Context()
}

// samplePods returns three pods, in the order ListPods sorts them.
func samplePods() []*corev1.Pod {
	return []*corev1.Pod{
		podstest.Pod("default", "web-1", 1),
		podstest.Pod("default", "web-2", 2),
		podstest.Pod("kube-system", "dns-0", 3),
	}
}

// recv returns the next event of s, failing the test on an error.
func recv(t *testing.T, s watchStream) *podsv1alpha1.PodWatchResponse {
	t.Helper()
	ev, err := s.Recv()
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	return ev
}

// expectEvent checks the type and pod of an event.
func expectEvent(t *testing.T, ev *podsv1alpha1.PodWatchResponse, typ podsv1alpha1.EventType, want *corev1pb.Pod) {
	t.Helper()
	if ev.GetType() != typ {
		t.Fatalf("event type = %v, want %v (pod %s)", ev.GetType(), typ, ev.GetPod().GetMetadata().GetName())
	}
	if !proto.Equal(ev.GetPod(), want) {
		t.Fatalf("%v event pod = %v\nwant %v", typ, ev.GetPod(), want)
	}
}
