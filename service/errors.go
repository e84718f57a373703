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

// errSelector is returned for a selector of a request that is too long, does
// not parse, or names a field that cannot be selected.
func errSelector(field string, err error) error {
	return errinfo.New(connect.CodeInvalidArgument, errinfo.InvalidSelector,
		fmt.Errorf("%s: %w", field, err), map[string]string{"field": field})
}

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
