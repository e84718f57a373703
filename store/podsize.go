package store

import (
	"errors"
	"fmt"
)

// DefaultMaxPodBytes is the default bound of one pod's encoding: the API
// server's limit on one object (etcd's request limit, 1.5 MiB), so that no
// pod the API server could hold is refused.
const DefaultMaxPodBytes = 3 << 19

// ErrPodTooLarge is what the error handler (WithErrorHandler) is told, in a
// wrapped error naming the pod, when a pod's encoding is larger than the
// bound of WithMaxPodBytes.
var ErrPodTooLarge = errors.New("the pod's encoding is larger than the store takes")

// WithMaxPodBytes sets the largest encoding of one pod the store takes:
// Upsert refuses a larger version, tells the error handler (ErrPodTooLarge)
// and counts it (TooLarge), and keeps the pod's previous version, if any,
// as it was. The default is DefaultMaxPodBytes, which 0 keeps (the zero
// rule of package source); a negative value takes pods of any size.
func WithMaxPodBytes(n int) Option {
	return func(s *Store) {
		switch {
		case n < 0:
			s.maxPodBytes = 0
		case n > 0:
			s.maxPodBytes = n
		default:
			s.maxPodBytes = DefaultMaxPodBytes
		}
	}
}

// TooLarge returns how many pod versions the store has refused for being
// larger than WithMaxPodBytes allows.
func (s *Store) TooLarge() uint64 { return s.tooLarge.Load() }

// checkSize refuses, counts and reports raw, the encoding of the pod
// namespace/name with uid, when it is over the bound.
func (s *Store) checkSize(namespace, name, uid string, raw []byte) bool {
	if s.maxPodBytes <= 0 || len(raw) <= s.maxPodBytes {
		return true
	}
	s.tooLarge.Add(1)
	s.onError(fmt.Errorf("pod %s/%s (uid %s) encodes to %d bytes, over the bound of %d: %w",
		namespace, name, uid, len(raw), s.maxPodBytes, ErrPodTooLarge))
	return false
}
