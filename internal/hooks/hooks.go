// Package hooks is the internal seam through which the module's own tests
// change the assembly of server.New: the conformance suite's self-test
// plants faults in it, tests give the peer credentials they want to be,
// and learn of the events they wait for (a request served, a connection
// accepted or closed) instead of polling for them.
// Its type is internal, so that only this module can set
// server.Config.Hooks; a server that serves agents has none.
package hooks

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1/v1alpha1connect"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/guard"
	"github.com/podsapi/podsapi/socket"
)

// Hooks change the assembly of server.New. Nil fields change nothing.
type Hooks struct {
	// Interceptors edits the interceptor chain of the Pods API, which it is
	// given outermost first and named: server.InterceptorMetrics, the names
	// of package guard (guard.NameReadiness, ...),
	// server.InterceptorFieldMasks.
	Interceptors func([]guard.Named) []guard.Named
	// Pods and Kubelet wrap the handlers of the typed and of the kubelet's
	// wire.
	Pods    func(podsv1alpha1connect.PodsHandler) podsv1alpha1connect.PodsHandler
	Kubelet func(v1alpha1connect.PodsHandler) v1alpha1connect.PodsHandler
	// PeerCred reads the credentials of a connection's peer instead of
	// SO_PEERCRED, so that a test may be any peer.
	PeerCred func(net.Conn) (socket.Cred, error)
	// Cgroup reads the cgroup file of a peer's process instead of
	// <HostProc>/PID/cgroup, so that a test's connections may be clients of
	// distinct pods or units whatever user runs the test.
	Cgroup func(ctx context.Context, pid int32) (string, error)
	// Served is called when the server has served a request of the API
	// socket: its handlers, guards and transport have all returned, so
	// that a test waits for this event, not for time, before it reads the
	// state the call changed (the open watches, a snapshot released).
	Served func(*http.Request)
	// ConnAccepted is called when the server has accepted a connection of
	// the API socket and counted it among the open ones; ConnClosed when
	// it has closed one and freed its slot.
	ConnAccepted func()
	ConnClosed   func()
	// NRIBackoff, when not zero, are the first and longest waits between
	// the NRI observer's connection attempts, so that tests that restart
	// the runtime's side wait little.
	NRIBackoff [2]time.Duration
}
