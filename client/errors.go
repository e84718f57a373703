package client

import (
	"errors"

	"connectrpc.com/connect"

	"github.com/podsapi/podsapi/errinfo"
)

// Sentinel errors wrapped by the errors of Client's calls, for errors.Is.
// The errors also keep their gRPC code: connect.CodeOf returns it.
var (
	// ErrNotSynced reports FAILED_PRECONDITION: the server's pod sources have
	// not synced yet. Retry later.
	ErrNotSynced = errors.New("the server has not synced yet")
	// ErrRateLimited reports RESOURCE_EXHAUSTED on ListPods or GetPod: the
	// server's rate limit was exceeded. Retry later, or watch instead of
	// polling.
	ErrRateLimited = errors.New("rate limited")
	// ErrNotFound reports NOT_FOUND: the node has no pod with that UID, or
	// none that FindPods's key matches (also a process that does not
	// exist).
	ErrNotFound = errors.New("pod not found")
	// ErrFellBehind reports RESOURCE_EXHAUSTED on a watch: the server dropped
	// the watcher because it did not read its events fast enough. Watch
	// again to resync.
	ErrFellBehind = errors.New("watch dropped for falling behind")
	// ErrServerGone reports the end of a watch by a server that is going
	// away (shutting down or restarting). A kubelet ends its watches with
	// RESOURCE_EXHAUSTED "watch client channel closed" when it stops, as
	// when it drops a slow watcher; the client tells them apart by whether
	// the socket still accepts connections, and wraps this error instead of
	// ErrFellBehind. Reconnect: watch again once the server is back.
	ErrServerGone = errors.New("the server went away")
	// ErrTooManyWatches reports RESOURCE_EXHAUSTED on a watch refused
	// because the server's limit of open watches (or the client's share of
	// them) is reached. Close a watch, or retry later.
	ErrTooManyWatches = errors.New("too many watches open")
	// ErrPermissionDenied reports PERMISSION_DENIED: the server does not
	// allow the client's user or groups.
	ErrPermissionDenied = errors.New("permission denied")
	// ErrRevisionTooOld reports OUT_OF_RANGE on a watch resumed with
	// WithResumeFrom: the server no longer holds every change after that
	// revision, or it restarted since. Watch again without it to resync.
	ErrRevisionTooOld = errors.New("revision too old to resume from")
	// ErrInvalidSelector reports a namespace, label selector or field
	// selector the server (or, on a server without selectors, the client)
	// rejects: INVALID_ARGUMENT.
	ErrInvalidSelector = errors.New("invalid selector")
	// ErrInvalidFindKey reports a FindPods key the server rejects:
	// INVALID_ARGUMENT.
	ErrInvalidFindKey = errors.New("invalid find key")
	// ErrAmbiguous reports a container ID prefix of FindPods that more than
	// one container's ID starts with: INVALID_ARGUMENT. Give more of the ID.
	ErrAmbiguous = errors.New("ambiguous container ID prefix")
)

// reasons maps the reasons of the server's ErrorInfo (package errinfo) to
// the sentinel errors.
var reasons = map[string]error{
	errinfo.NotSynced:         ErrNotSynced,
	errinfo.PodNotFound:       ErrNotFound,
	errinfo.RateLimited:       ErrRateLimited,
	errinfo.ClientRateLimited: ErrRateLimited,
	errinfo.FellBehind:        ErrFellBehind,
	errinfo.TooManyWatches:    ErrTooManyWatches,
	errinfo.PeerDenied:        ErrPermissionDenied,
	errinfo.RevisionTooOld:    ErrRevisionTooOld,
	errinfo.InvalidSelector:   ErrInvalidSelector,

	errinfo.NoPodMatches:         ErrNotFound,
	errinfo.ProcessNotFound:      ErrNotFound,
	errinfo.InvalidFindKey:       ErrInvalidFindKey,
	errinfo.AmbiguousContainerID: ErrAmbiguous,
}

// ResumeRevision returns the revision a watch ended by err may resume from
// (WithResumeFrom): the metadata "revision" of the server's FELL_BEHIND
// error, or "" when there is none.
func ResumeRevision(err error) string {
	var ce *connect.Error
	if !errors.As(err, &ce) || errinfo.Reason(ce) != errinfo.FellBehind {
		return ""
	}
	return errinfo.Of(ce).GetMetadata()["revision"]
}

// apiError is an error of the server that also wraps a sentinel error.
type apiError struct {
	sentinel error
	err      *connect.Error
}

// Error returns the server's error, with its code.
func (e *apiError) Error() string { return e.err.Error() }

// Unwrap returns the sentinel and the connect error.
func (e *apiError) Unwrap() []error { return []error{e.sentinel, e.err} }

// wrapError adds the sentinel error of err, if the server sent it: by the
// reason of its ErrorInfo when it has one (podsapi), by its code otherwise (a
// kubelet, which attaches none). watch says whether err ends a watch, where
// a RESOURCE_EXHAUSTED without a reason means ErrFellBehind rather than
// ErrRateLimited. An error the client raised itself (its deadline, its read
// limit, a refused connection) gets none: connect.IsWireError tells them
// apart, never the message.
func wrapError(err error, watch bool) error {
	var ce *connect.Error
	if err == nil || !errors.As(err, &ce) || !connect.IsWireError(ce) {
		return err
	}
	sentinel := reasons[errinfo.Reason(ce)]
	if info := errinfo.Of(ce); info == nil {
		switch ce.Code() {
		case connect.CodeFailedPrecondition:
			sentinel = ErrNotSynced
		case connect.CodeNotFound:
			sentinel = ErrNotFound
		case connect.CodePermissionDenied:
			sentinel = ErrPermissionDenied
		case connect.CodeResourceExhausted:
			sentinel = ErrRateLimited
			if watch {
				sentinel = ErrFellBehind
			}
		}
	}
	if sentinel == nil {
		return err
	}
	return &apiError{sentinel: sentinel, err: ce}
}

// errFieldMask reports a field mask that does not parse, found by the client
// itself on the kubelet's wire: INVALID_ARGUMENT, as the server reports it.
func errFieldMask(err error) error {
	return connect.NewError(connect.CodeInvalidArgument, err)
}

// errDecode reports a pod from the server that does not decode (or project).
func errDecode(err error) error {
	return connect.NewError(connect.CodeInternal, err)
}
