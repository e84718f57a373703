package server_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// fixture is a real server on a real socket, fed by a store the test
// writes, started the one way tests start one (podstest.Serve).
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
	f := podstest.Serve(t, podstest.NewStore(opts, unsynced, pods...), cfg)
	return &fixture{store: f.Store, srv: f.Server, socket: f.Socket, Events: f.Events}
}

// ctx returns a context cancelled at the end of the test. It has no
// deadline: the calls and watches it bounds end with the events they wait
// for, however slow the machine.
func ctx(t *testing.T) context.Context {
	return t.Context()
}
