// Package errinfo names the google.rpc.ErrorInfo details that the podsapi
// server attaches to its errors, so that clients can tell errors apart by a
// stable reason rather than by their message. Every RESOURCE_EXHAUSTED,
// FAILED_PRECONDITION, PERMISSION_DENIED, NOT_FOUND, INVALID_ARGUMENT,
// OUT_OF_RANGE and UNAVAILABLE the server itself decides carries one ErrorInfo with Domain and
// one of the reasons below; the message stays for people.
//
// The package is a leaf: the server and the clients both import it.
package errinfo

import (
	"errors"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
)

// Domain is the ErrorInfo domain of every error of the server.
const Domain = "podsapi.io"

// The reasons, each with the code it comes with.
const (
	// NotSynced (FAILED_PRECONDITION): the pod sources have not synced yet.
	NotSynced = "NOT_SYNCED"
	// RateLimited (RESOURCE_EXHAUSTED): ListPods or GetPod beyond the rate
	// limit shared by every client. Metadata "procedure".
	RateLimited = "RATE_LIMITED"
	// ClientRateLimited (RESOURCE_EXHAUSTED): beyond the client's own rate
	// limit (--per-client-qps). Metadata "procedure".
	ClientRateLimited = "CLIENT_RATE_LIMITED"
	// FellBehind (RESOURCE_EXHAUSTED): the watcher did not read its events
	// fast enough and was dropped. Metadata "lost", the events lost, and,
	// on the typed service, "revision": the revision up to which the
	// watcher received every change it selects, to resume from.
	FellBehind = "FELL_BEHIND"
	// TooManyWatches (RESOURCE_EXHAUSTED): the server's limit of open
	// watches is reached. Metadata "limit".
	TooManyWatches = "TOO_MANY_WATCHES"
	// PeerDenied (PERMISSION_DENIED): the client's UID and groups are not
	// allowed. Metadata "uid" and "gid" when known.
	PeerDenied = "PEER_DENIED"
	// PodNotFound (NOT_FOUND): GetPod of a UID the node does not have.
	// Metadata "uid".
	PodNotFound = "POD_NOT_FOUND"
	// EmptyUID (INVALID_ARGUMENT): GetPod without a podUID.
	EmptyUID = "EMPTY_UID"
	// InvalidFieldMask (INVALID_ARGUMENT): the field mask does not parse or
	// names an unknown field.
	InvalidFieldMask = "INVALID_FIELD_MASK"
	// InvalidSelector (INVALID_ARGUMENT): a namespace, label selector or
	// field selector is too long, does not parse, or names a field that
	// cannot be selected. Metadata "field", the request field at fault
	// (namespace, label_selector or field_selector).
	InvalidSelector = "INVALID_SELECTOR"
	// InvalidRevision (INVALID_ARGUMENT): resume_from is not a revision
	// this server wrote. Metadata "revision".
	InvalidRevision = "INVALID_REVISION"
	// RevisionTooOld (OUT_OF_RANGE): the server no longer holds the changes
	// after resume_from (its history is bounded, or it restarted since):
	// list or watch again without resume_from. Metadata "revision".
	RevisionTooOld = "REVISION_TOO_OLD"
	// InvalidFindKey (INVALID_ARGUMENT): FindPods without a key, or with a
	// malformed one, or with a negative or malformed wait. Metadata "key",
	// the key at fault (container_id, ip, pid, cgroup_path, caller, wait,
	// or key when none is set).
	InvalidFindKey = "INVALID_FIND_KEY"
	// AmbiguousContainerID (INVALID_ARGUMENT): FindPods of a container ID
	// prefix that more than one container's ID starts with. Metadata
	// "container_id".
	AmbiguousContainerID = "AMBIGUOUS_CONTAINER_ID"
	// NoPodMatches (NOT_FOUND): FindPods of a key no pod on the node
	// matches (a process outside any pod included). Metadata "key" and,
	// when known, "value".
	NoPodMatches = "NO_POD_MATCHES"
	// ProcessNotFound (NOT_FOUND): FindPods of a PID (or the caller's) that
	// no process has, or whose process exited during the lookup. Metadata
	// "key" and "pid".
	ProcessNotFound = "PROCESS_NOT_FOUND"
	// ProcessLookupUnavailable (UNAVAILABLE when the cgroups of the process
	// could not be read in time: retry; FAILED_PRECONDITION when the
	// server cannot read them at all): FindPods by pid or caller. Metadata
	// "pid".
	ProcessLookupUnavailable = "PROCESS_LOOKUP_UNAVAILABLE"
	// CallerUnknown (FAILED_PRECONDITION): FindPods of the caller when the
	// server knows no PID of the peer of the connection.
	CallerUnknown = "CALLER_UNKNOWN"
	// ShuttingDown (UNAVAILABLE): the server is shutting down; reconnect.
	ShuttingDown = "SHUTTING_DOWN"
	// TooManyPending (RESOURCE_EXHAUSTED): too many calls of the client
	// (its pod, systemd unit or UID) are waiting for their request.
	// Metadata "limit" and "client".
	TooManyPending = "TOO_MANY_PENDING_CALLS"
	// TooManyReflectionStreams (RESOURCE_EXHAUSTED): the client has as many
	// reflection streams open as it may: end one (grpcurl opens one per
	// invocation). Metadata "limit" and "client".
	TooManyReflectionStreams = "TOO_MANY_REFLECTION_STREAMS"
	// TooManyMasks (RESOURCE_EXHAUSTED): the client's watches, or the
	// server's, already use as many distinct field masks as they may: watch
	// with a mask already in use, or close a watch. Metadata "limit" and,
	// for the client's share, "client".
	TooManyMasks = "TOO_MANY_MASKS"
	// RequestTimeout (DEADLINE_EXCEEDED): the request did not arrive in
	// time. Metadata "timeout".
	RequestTimeout = "REQUEST_TIMEOUT"
	// MemoryBudget (RESOURCE_EXHAUSTED): what the request needs the server
	// to keep does not fit in the client's fair share of the server's
	// memory budget (--memory-budget-bytes). Retry with backoff, or with
	// fewer watches resuming at once; metadata "kind", and "revision"
	// when the watch can resume from it.
	MemoryBudget = "MEMORY_BUDGET_EXCEEDED"
	// TooManyFindWaiters (RESOURCE_EXHAUSTED): FindPods with a wait when
	// the server's calls waiting at once (--max-find-waiters), or the
	// client's (--max-find-waiters-per-client), are at their bound: retry
	// with backoff, or wait in fewer calls at once. Metadata "limit" and,
	// for the client's bound, "client".
	TooManyFindWaiters = "TOO_MANY_FIND_WAITERS"
	// WorkloadsOff (FAILED_PRECONDITION): ListPods or WatchPods with a
	// workload_selector on a server that resolves no workloads
	// (podsapi-server --workloads=off): select without it, or run the
	// server with workloads.
	WorkloadsOff = "WORKLOADS_OFF"
)

// New returns a connect error with code, err and an ErrorInfo of reason and
// metadata (which may be nil).
func New(code connect.Code, reason string, err error, metadata map[string]string) *connect.Error {
	ce := connect.NewError(code, err)
	if d, derr := connect.NewErrorDetail(&errdetails.ErrorInfo{Reason: reason, Domain: Domain, Metadata: metadata}); derr == nil {
		ce.AddDetail(d)
	}
	return ce
}

// Of returns the ErrorInfo the server attached to err, or nil: an error the
// client raised itself (a timeout, a refused connection, a message over its
// read limit) has none, nor has an error of another server.
func Of(err error) *errdetails.ErrorInfo {
	var ce *connect.Error
	if !errors.As(err, &ce) || !connect.IsWireError(ce) {
		return nil
	}
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if info, ok := v.(*errdetails.ErrorInfo); derr == nil && ok && info.GetDomain() == Domain {
			return info
		}
	}
	return nil
}

// Reason returns the reason of the ErrorInfo the server attached to err, or
// "".
func Reason(err error) string { return Of(err).GetReason() }
