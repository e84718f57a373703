package server

import (
	"context"

	"github.com/podsapi/podsapi/guard"
)

// callerPID returns the PID of the peer of the request's connection
// (SO_PEERCRED, read when the connection was accepted) for FindPods of the
// caller, and false when the connection told none: the kernel gives 0 for
// a peer whose PID namespace the server cannot see.
func callerPID(ctx context.Context) (int32, bool) {
	p := guard.PeerFrom(ctx)
	if p == nil || !p.Known || p.PID <= 0 {
		return 0, false
	}
	return p.PID, true
}
