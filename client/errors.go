package client

import (
	"errors"
	"strings"

	"connectrpc.com/connect"
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
	// ErrNotFound reports NOT_FOUND: the node has no pod with that UID.
	ErrNotFound = errors.New("pod not found")
	// ErrFellBehind reports RESOURCE_EXHAUSTED on a watch: the server dropped
	// the watcher because it did not read its events fast enough. Watch
	// again to resync.
	ErrFellBehind = errors.New("watch dropped for falling behind")
)

// apiError is an error of the server that also wraps a sentinel error.
type apiError struct {
	sentinel error
	err      *connect.Error
}

// Error returns the server's error, with its code.
func (e *apiError) Error() string { return e.err.Error() }

// Unwrap returns the sentinel and the connect error.
func (e *apiError) Unwrap() []error { return []error{e.sentinel, e.err} }

// wrapError adds the sentinel matching err's code, if any. watch says
// whether err ends a watch, where RESOURCE_EXHAUSTED means ErrFellBehind
// rather than ErrRateLimited.
func wrapError(err error, watch bool) error {
	var ce *connect.Error
	if err == nil || !errors.As(err, &ce) {
		return err
	}
	var sentinel error
	switch ce.Code() {
	case connect.CodeFailedPrecondition:
		sentinel = ErrNotSynced
	case connect.CodeNotFound:
		sentinel = ErrNotFound
	case connect.CodeResourceExhausted:
		if strings.Contains(ce.Message(), "larger than configured max") {
			return err // connect's own read limit: see WithReadMaxBytes
		}
		sentinel = ErrRateLimited
		if watch {
			sentinel = ErrFellBehind
		}
	default:
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
