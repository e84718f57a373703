package store

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Errors of WatchFrom.
var (
	// ErrRevisionInvalid is returned for a revision this store did not
	// write: malformed, or ahead of the store.
	ErrRevisionInvalid = errors.New("invalid revision")
	// ErrRevisionTooOld is returned for a revision whose later changes the
	// store no longer holds: older than its history, or written by another
	// store (before a restart of the server).
	ErrRevisionTooOld = errors.New("revision too old")
)

// newInstance returns the random name of a store instance, which its
// revisions carry so that a revision of another instance (a server before
// its restart) is never taken for one of this store.
func newInstance() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24).
	return hex.EncodeToString(b[:])
}

// Revision returns the opaque revision of the store at version: its
// instance and the version, "<instance>.<version>".
func (s *Store) Revision(version uint64) string {
	return s.instance + "." + strconv.FormatUint(version, 10)
}

// parseRevision returns the version of a revision of this store.
func (s *Store) parseRevision(rev string) (uint64, error) {
	instance, v, ok := strings.Cut(rev, ".")
	if !ok || len(instance) != len(s.instance) {
		return 0, fmt.Errorf("%w %q: not a revision of this server", ErrRevisionInvalid, rev)
	}
	version, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w %q: not a revision of this server", ErrRevisionInvalid, rev)
	}
	if instance != s.instance {
		return 0, fmt.Errorf("%w: %q is a revision of another instance of the server (it restarted)", ErrRevisionTooOld, rev)
	}
	return version, nil
}

// WellFormedRevision reports whether rev has the form of a revision of a
// store ("<instance>.<version>"), whichever store wrote it: what a client
// may hand back of one.
func WellFormedRevision(rev string) bool {
	instance, v, ok := strings.Cut(rev, ".")
	if !ok || len(instance) != 16 {
		return false
	}
	if _, err := hex.DecodeString(instance); err != nil {
		return false
	}
	_, err := strconv.ParseUint(v, 10, 64)
	return err == nil
}
