package service

import (
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"k8s.io/apimachinery/pkg/types"
)

// The errors a client can see are all built here, each with a deliberate
// code and a message that tells the client what to do.

var (
	errNotSynced    = connect.NewError(connect.CodeFailedPrecondition, errors.New("the pod sources have not synced yet: retry later"))
	errEmptyUID     = connect.NewError(connect.CodeInvalidArgument, errors.New("podUID must not be empty"))
	errShuttingDown = connect.NewError(connect.CodeUnavailable, errors.New("the server is shutting down: reconnect and watch again"))
	errEncoding     = connect.NewError(connect.CodeInternal, errors.New("the server could not encode a pod"))
)

// errRateLimited is returned when a request exceeds the rate limit.
func errRateLimited(procedure string) error {
	return connect.NewError(connect.CodeResourceExhausted,
		fmt.Errorf("%s: rate limit exceeded: retry later, or use WatchPods instead of polling", procedure))
}

// errNotFound is returned by GetPod for an unknown UID.
func errNotFound(uid types.UID) error {
	return connect.NewError(connect.CodeNotFound, fmt.Errorf("no pod with UID %q on this node", uid))
}

// errFieldMask is returned for a field mask that does not parse or validate.
func errFieldMask(err error) error {
	return connect.NewError(connect.CodeInvalidArgument, err)
}

// errFellBehind ends the stream of a watcher that was dropped.
func errFellBehind(lost int) error {
	return connect.NewError(connect.CodeResourceExhausted,
		fmt.Errorf("watch dropped: the client fell behind and %d events were lost: watch again", lost))
}

// errClientRateLimited is returned when a client exceeds its own rate limit.
func errClientRateLimited(procedure string) error {
	return connect.NewError(connect.CodeResourceExhausted,
		fmt.Errorf("%s: per-client rate limit exceeded: retry later, or use WatchPods instead of polling", procedure))
}

// errTooManyWatches is returned for a watch beyond the limit of open watches.
func errTooManyWatches(limit int64) error {
	return connect.NewError(connect.CodeResourceExhausted,
		fmt.Errorf("too many watches are open on this server (limit %d): retry later", limit))
}

// errPermissionDenied is returned to a peer the access policy does not allow.
func errPermissionDenied(p *Peer) error {
	if p == nil || !p.Known {
		return connect.NewError(connect.CodePermissionDenied,
			errors.New("the server could not identify the client process (SO_PEERCRED): access denied"))
	}
	return connect.NewError(connect.CodePermissionDenied,
		fmt.Errorf("uid %d (gid %d) is not allowed to use the Pods API (see --allowed-uids and --allowed-gids)", p.UID, p.GID))
}

// errTooManyClientWatches is returned for a watch beyond the share of open
// watches of one peer UID.
func errTooManyClientWatches(uid uint32, limit int) error {
	return connect.NewError(connect.CodeResourceExhausted,
		fmt.Errorf("uid %d has too many watches open (limit %d per client, --max-watchers-per-uid): close some, or share one watch", uid, limit))
}
