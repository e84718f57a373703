package guard

import (
	"errors"
	"fmt"
	"strconv"

	"connectrpc.com/connect"

	"github.com/podsapi/podsapi/errinfo"
	"github.com/podsapi/podsapi/internal/admit"
)

// The errors the guards answer with are all built here, each with a
// deliberate code, a message that tells the client what to do, and a
// google.rpc.ErrorInfo with a stable reason (package errinfo). They name no
// command-line flag: the library does not know how it is configured.

var errNotSynced = errinfo.New(connect.CodeFailedPrecondition, errinfo.NotSynced,
	errors.New("the pod sources have not synced yet: retry later"), nil)

// errRateLimited is returned when a request exceeds the rate limit.
func errRateLimited(procedure string) error {
	return errinfo.New(connect.CodeResourceExhausted, errinfo.RateLimited,
		fmt.Errorf("%s: rate limit exceeded: retry later, or use WatchPods instead of polling", procedure),
		map[string]string{"procedure": procedure})
}

// errClientRateLimited is returned when a client exceeds its own rate limit.
func errClientRateLimited(procedure string) error {
	return errinfo.New(connect.CodeResourceExhausted, errinfo.ClientRateLimited,
		fmt.Errorf("%s: this client's rate limit exceeded (its --per-client-qps, or its fair share of the shared limit while other clients call): retry later, or use WatchPods instead of polling", procedure),
		map[string]string{"procedure": procedure})
}

// errTooManyWatches is returned for a watch beyond the limit of open watches.
func errTooManyWatches(limit int64) error {
	return errinfo.New(connect.CodeResourceExhausted, errinfo.TooManyWatches,
		fmt.Errorf("too many watches are open on this server (limit %d): retry later", limit),
		map[string]string{"limit": strconv.FormatInt(limit, 10)})
}

// errWatchSlots is the refusal of a watch that Slots.Acquire refused with
// err, for peer p.
func errWatchSlots(err error, p *Peer) error {
	var full *admit.SlotsFull
	if !errors.As(err, &full) {
		return err
	}
	if full.Key != "" {
		return errTooManyClientWatches(full.Key, p, full.Limit)
	}
	return errTooManyWatches(int64(full.Limit))
}

// errPermissionDenied is returned to a peer the access policy does not allow.
func errPermissionDenied(p *Peer) error {
	if p == nil || !p.Known {
		return errinfo.New(connect.CodePermissionDenied, errinfo.PeerDenied,
			errors.New("the server could not identify the client process (SO_PEERCRED): access denied"), nil)
	}
	return errinfo.New(connect.CodePermissionDenied, errinfo.PeerDenied,
		fmt.Errorf("uid %d (gid %d) is not allowed to use the Pods API: ask the node's administrator", p.UID, p.GID),
		map[string]string{"uid": strconv.FormatUint(uint64(p.UID), 10), "gid": strconv.FormatUint(uint64(p.GID), 10)})
}

// errTooManyClientWatches is returned for a watch beyond the share of open
// watches of one client.
func errTooManyClientWatches(client string, p *Peer, limit int) error {
	return errinfo.New(connect.CodeResourceExhausted, errinfo.TooManyWatches,
		fmt.Errorf("client %s (uid %d) has too many watches open (limit %d per client, at most half the server's): close some, or share one watch", client, peerUID(p), limit),
		map[string]string{"limit": strconv.Itoa(limit), "uid": strconv.FormatUint(uint64(peerUID(p)), 10), "client": client})
}
