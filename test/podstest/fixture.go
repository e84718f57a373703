package podstest

import (
	"net"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/internal/hooks"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/socket"
	"github.com/podsapi/podsapi/store"
)

// Fixture is a real server (server.New) on a real socket, serving a store
// the test writes, counting the server's events: what Serve starts.
type Fixture struct {
	Store  *store.Store
	Server *server.Server
	Socket string
	*Events

	stop func()
}

// NewStore returns a store built with opts holding pods, synced unless
// unsynced is set.
func NewStore(opts []store.Option, unsynced bool, pods ...*corev1.Pod) *store.Store {
	st := store.New(opts...)
	for _, p := range pods {
		st.Upsert(p)
	}
	if !unsynced {
		st.MarkSynced()
	}
	return st
}

// Serve starts a server for st with cfg, as Start does, and has it count
// its events (Events), beside the hooks cfg already has: the one way tests
// start a server they drive over its socket.
func Serve(t testing.TB, st *store.Store, cfg server.Config) *Fixture {
	t.Helper()
	ev := withEvents(&cfg)
	srv, stop := start(t, st, cfg)
	return &Fixture{Store: st, Server: srv, Socket: srv.SocketPath(), Events: ev, stop: stop}
}

// Stop stops the server now rather than at the end of the test: it cancels
// Serve and waits for it to return, failing the test if it returns an
// error.
func (f *Fixture) Stop() { f.stop() }

// Revision returns the store's current revision.
func (f *Fixture) Revision() string {
	v, _ := f.Store.List()
	return f.Store.Revision(v)
}

// withEvents has the server of cfg count its events, beside the hooks cfg
// already has.
func withEvents(cfg *server.Config) *Events {
	ev := NewEvents()
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

// AsRoot returns the hooks that have the server see every peer as root
// (uid 0, gid 0, no supplementary groups, its real pid), whatever the
// test's user, so that the access tests run as any user.
func AsRoot() *hooks.Hooks {
	return &hooks.Hooks{PeerCred: func(c net.Conn) (socket.Cred, error) {
		cred, err := socket.PeerCred(c)
		cred.UID, cred.GID, cred.Groups = 0, 0, nil
		return cred, err
	}}
}

// SamplePods returns three pods, in the order ListPods sorts them.
func SamplePods() []*corev1.Pod {
	return []*corev1.Pod{
		Pod("default", "web-1", 1),
		Pod("default", "web-2", 2),
		Pod("kube-system", "dns-0", 3),
	}
}
