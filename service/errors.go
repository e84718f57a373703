package service

import (
	"errors"
	"fmt"
	"strconv"

	"connectrpc.com/connect"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/errinfo"
	"github.com/podsapi/podsapi/store"
)

// The errors a client can see are all built here, each with a deliberate
// code and a message that tells the client what to do.

// Each carries a google.rpc.ErrorInfo with a stable reason (package
// errinfo), which clients switch on instead of the message.

var (
	errEmptyUID = errinfo.New(connect.CodeInvalidArgument, errinfo.EmptyUID,
		errors.New("podUID must not be empty"), nil)
	errShuttingDown = errinfo.New(connect.CodeUnavailable, errinfo.ShuttingDown,
		errors.New("the server is shutting down: reconnect and watch again"), nil)
	errEncoding = connect.NewError(connect.CodeInternal, errors.New("the server could not encode a pod"))
	// errWrite ends a watch whose events could not be written while its
	// client was still there (a client that left ends with CANCELED).
	errWrite = connect.NewError(connect.CodeUnavailable, errors.New("the server could not write the watch's events: watch again"))
)

// errNotFound is returned by GetPod for an unknown UID.
func errNotFound(uid types.UID) error {
	return errinfo.New(connect.CodeNotFound, errinfo.PodNotFound,
		fmt.Errorf("no pod with UID %q on this node", uid), map[string]string{"uid": string(uid)})
}

// errFieldMask is returned for a field mask that does not parse or validate.
func errFieldMask(err error) error {
	return errinfo.New(connect.CodeInvalidArgument, errinfo.InvalidFieldMask, err, nil)
}

// errFellBehind ends the stream of a watcher that was dropped. revision, when
// not empty, is the revision the watcher can resume from.
func errFellBehind(lost int, revision string) error {
	if revision == "" {
		return errinfo.New(connect.CodeResourceExhausted, errinfo.FellBehind,
			fmt.Errorf("watch dropped: the client fell behind and %d events were lost: watch again", lost),
			map[string]string{"lost": strconv.Itoa(lost)})
	}
	return errinfo.New(connect.CodeResourceExhausted, errinfo.FellBehind,
		fmt.Errorf("watch dropped: the client fell behind and %d events were lost: watch again with resume_from %q", lost, revision),
		map[string]string{"lost": strconv.Itoa(lost), "revision": revision})
}

// errReplayTooOld ends a resumed watch whose replay fell behind the history:
// the changes after revision left it before the watch sent them.
func errReplayTooOld(revision string, err error) error {
	return errinfo.New(connect.CodeOutOfRange, errinfo.RevisionTooOld,
		fmt.Errorf("resume_from: the watch replayed its changes slower than the history turned over (%w): list or watch again without resume_from", err),
		map[string]string{"revision": revision})
}

// errMemoryShare ends a resumed watch whose replay would keep more than its
// client's fair share of the memory budget; revision is where it may
// resume from.
func errMemoryShare(revision string) error {
	return errinfo.New(connect.CodeResourceExhausted, errinfo.MemoryBudget,
		fmt.Errorf("the replays of this client's resumed watches hold its share of the server's memory budget: resume from revision %q later, with backoff, or resume fewer watches at once", revision),
		map[string]string{"kind": "replays", "revision": revision})
}

// errResponsesInFlight refuses a call of a client whose responses still
// being written hold held bytes: n more would take it beyond its share.
func errResponsesInFlight(client string, held, n, share int64) error {
	return errinfo.New(connect.CodeResourceExhausted, errinfo.MemoryBudget,
		fmt.Errorf("this client (%s) has %d bytes of responses still being written, and this one takes %d: its share of the server's memory for responses in flight is %d bytes. Read the responses already asked for before asking for more, or retry with backoff", client, held, n, share),
		map[string]string{"kind": "responses", "client": client, "limit": strconv.FormatInt(share, 10)})
}

// errSelector is returned for a selector of a request that is too long, does
// not parse, or names a field that cannot be selected.
func errSelector(field string, err error) error {
	return errinfo.New(connect.CodeInvalidArgument, errinfo.InvalidSelector,
		fmt.Errorf("%s: %w", field, err), map[string]string{"field": field})
}

// errWorkloadsOff is returned for a workload selector on a server that
// resolves no workloads.
var errWorkloadsOff = errinfo.New(connect.CodeFailedPrecondition, errinfo.WorkloadsOff,
	errors.New("workload_selector: this server resolves no workloads (podsapi-server --workloads=off): select without it"), nil)

// errResume is returned for a resume_from the watch cannot resume from.
func errResume(revision string, err error) error {
	if len(revision) > maxRevisionLen {
		return errinfo.New(connect.CodeInvalidArgument, errinfo.InvalidRevision,
			fmt.Errorf("resume_from: %d bytes, not a revision of this server", len(revision)), nil)
	}
	md := map[string]string{"revision": revision}
	if errors.Is(err, store.ErrRevisionTooOld) {
		return errinfo.New(connect.CodeOutOfRange, errinfo.RevisionTooOld,
			fmt.Errorf("resume_from: %w: list or watch again without resume_from", err), md)
	}
	return errinfo.New(connect.CodeInvalidArgument, errinfo.InvalidRevision,
		fmt.Errorf("resume_from: %w: pass a revision this server sent", err), md)
}

// The errors of FindPods.
var (
	errCallerUnknown = errinfo.New(connect.CodeFailedPrecondition, errinfo.CallerUnknown,
		errors.New("the server does not know the PID of the caller: the connection is not a UNIX socket, or the caller's PID namespace is not visible from the server's (run the server with hostPID, or look up by pid)"), nil)
)

// errFindKey is returned by FindPods for a missing or malformed key.
func errFindKey(key, msg string) error {
	return errinfo.New(connect.CodeInvalidArgument, errinfo.InvalidFindKey,
		fmt.Errorf("%s: %s", key, msg), map[string]string{"key": key})
}

// errAmbiguous is returned by FindPods for a container ID prefix of more
// than one container.
func errAmbiguous(id string, err error) error {
	return errinfo.New(connect.CodeInvalidArgument, errinfo.AmbiguousContainerID,
		fmt.Errorf("container_id: %w: give more of the ID", err), map[string]string{"container_id": id})
}

// errNoMatch is returned by FindPods when key matches no pod; value, when
// not empty, is the key's value as the server understood it.
func errNoMatch(key, value, msg string) error {
	md := map[string]string{"key": key}
	if value != "" {
		md["value"] = value
	}
	return errinfo.New(connect.CodeNotFound, errinfo.NoPodMatches, fmt.Errorf("%s: %s", key, msg), md)
}

// errNoProcess is returned by FindPods for a PID no process has (or whose
// process exited during the lookup).
func errNoProcess(key string, pid int32) error {
	return errinfo.New(connect.CodeNotFound, errinfo.ProcessNotFound,
		fmt.Errorf("%s: no process %d in the server's PID namespace (it may have exited)", key, pid),
		map[string]string{"key": key, "pid": strconv.Itoa(int(pid))})
}

// errProcessBusy is returned by FindPods when the cgroups of a process could
// not be read in time.
func errProcessBusy(pid int32) error {
	return errinfo.New(connect.CodeUnavailable, errinfo.ProcessLookupUnavailable,
		fmt.Errorf("the cgroups of process %d could not be read in time: retry", pid), map[string]string{"pid": strconv.Itoa(int(pid))})
}

// errProcessUnreadable is returned by FindPods when the cgroups of a process
// cannot be read (the server's --host-proc, or its permissions).
func errProcessUnreadable(pid int32) error {
	return errinfo.New(connect.CodeFailedPrecondition, errinfo.ProcessLookupUnavailable,
		fmt.Errorf("the server cannot read the cgroups of process %d: check its --host-proc and permissions", pid), map[string]string{"pid": strconv.Itoa(int(pid))})
}

// errTooManyMasks refuses a watch whose field mask would be one more
// distinct mask than the watches of its client (client not empty) or of the
// server may use.
func errTooManyMasks(client string, limit int) error {
	if client == "" {
		return errinfo.New(connect.CodeResourceExhausted, errinfo.TooManyMasks,
			fmt.Errorf("the watches of this server use %d distinct field masks, the most they may: watch with a mask already in use, or retry later", limit),
			map[string]string{"limit": strconv.Itoa(limit)})
	}
	return errinfo.New(connect.CodeResourceExhausted, errinfo.TooManyMasks,
		fmt.Errorf("the watches of client %s use %d distinct field masks, the most one client may: watch with a mask already in use, or close a watch", client, limit),
		map[string]string{"limit": strconv.Itoa(limit), "client": client})
}

// errTooManyFindWaiters refuses a FindPods wait beyond the bound of the
// calls waiting at once: the server's when client is "", else the client's.
func errTooManyFindWaiters(limit int, client string) error {
	md := map[string]string{"limit": strconv.Itoa(limit)}
	if client == "" {
		return errinfo.New(connect.CodeResourceExhausted, errinfo.TooManyFindWaiters,
			fmt.Errorf("the server already has %d FindPods calls waiting (--max-find-waiters): retry with backoff", limit), md)
	}
	md["client"] = client
	return errinfo.New(connect.CodeResourceExhausted, errinfo.TooManyFindWaiters,
		fmt.Errorf("this client (%s) already has %d FindPods calls waiting, its share (the smaller of --max-find-waiters-per-client and half --max-find-waiters): wait in fewer calls at once, or retry with backoff", client, limit), md)
}

// errWaiterMemory refuses a FindPods wait that does not fit in the
// client's share of the memory budget.
func errWaiterMemory(client string) error {
	return errinfo.New(connect.CodeResourceExhausted, errinfo.MemoryBudget,
		fmt.Errorf("the FindPods calls waiting do not fit in this client's (%s) share of the server's memory budget: wait in fewer calls at once, or retry with backoff", client),
		map[string]string{"kind": "waiters", "client": client})
}
