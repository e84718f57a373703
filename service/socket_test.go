package service_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// The tests of this package that need what only a whole server gives (its
// transport's raw writes and flow control, reflection, the caller's
// credentials, several instances) drive a real server over a real socket,
// started the one way tests start one (podstest.Serve); the others use the
// in-memory harness (harness_test.go).

// start serves pods from a fresh store over a real socket, synced unless
// unsynced is set.
func start(t *testing.T, cfg server.Config, unsynced bool, pods ...*corev1.Pod) *podstest.Fixture {
	t.Helper()
	return podstest.Serve(t, podstest.NewStore(nil, unsynced, pods...), cfg)
}

// startWith is start for a synced store built with opts.
func startWith(t *testing.T, cfg server.Config, opts []store.Option, pods ...*corev1.Pod) *podstest.Fixture {
	t.Helper()
	return podstest.Serve(t, podstest.NewStore(opts, false, pods...), cfg)
}
