package kubeletgrpc

import (
	"fmt"

	"github.com/podsapi/podsapi/budget"
)

// DefaultMaxSnapshotPods is the default bound of the pods of one snapshot:
// far above the kubelet's --max-pods (110 by default, rarely above 500).
const DefaultMaxSnapshotPods = 10000

// The default bound of the bytes of one snapshot is MaxSnapshotShare of the
// memory limit, between MinMaxSnapshotBytes and DefaultMaxSnapshotBytes
// (also the bound without a limit): a decoded pod takes several times its
// encoding, and the snapshot is held beside the pods already known.
const (
	MaxSnapshotShare        = 10
	MinMaxSnapshotBytes     = 4 << 20
	DefaultMaxSnapshotBytes = 256 << 20
)

// snapshotBounds bound what the Source accepts from one stream before its
// INITIAL_SYNC_COMPLETE: the pods it holds, and the bytes of pods it
// received (repeated versions of one pod count each time).
type snapshotBounds struct {
	pods  int
	bytes int64
}

// WithSnapshotBounds bounds one snapshot of the kubelet (the events of a
// stream before its INITIAL_SYNC_COMPLETE) to pods pods and bytes bytes of
// pod encodings received. A snapshot beyond either is abandoned: the stream
// is closed, the error counted (reason too_large) and the Source reconnects
// after its backoff, keeping the pods it last knew. The defaults are
// DefaultMaxSnapshotPods and a tenth of the memory limit (see
// MaxSnapshotShare); non-positive values keep them.
func WithSnapshotBounds(pods int, bytes int64) Option {
	return func(o *options) {
		if pods > 0 {
			o.snapshot.pods = pods
		}
		if bytes > 0 {
			o.snapshot.bytes = bytes
		}
	}
}

// resolve fills in the defaults of b.
func (b snapshotBounds) resolve() snapshotBounds {
	if b.pods <= 0 {
		b.pods = DefaultMaxSnapshotPods
	}
	if b.bytes <= 0 {
		b.bytes = budget.Share(budget.Limit(), MaxSnapshotShare, MinMaxSnapshotBytes, DefaultMaxSnapshotBytes)
	}
	return b
}

// check returns the result that abandons a snapshot of pods pods after
// bytes bytes received, or nil while it is within the bounds.
func (b snapshotBounds) check(pods int, bytes int64) *result {
	switch {
	case pods > b.pods:
		return &result{reason: reasonTooLarge, err: fmt.Errorf("the snapshot is over %d pods without INITIAL_SYNC_COMPLETE: abandoned", b.pods)}
	case bytes > b.bytes:
		return &result{reason: reasonTooLarge, err: fmt.Errorf("the snapshot is over %d bytes without INITIAL_SYNC_COMPLETE: abandoned", b.bytes)}
	}
	return nil
}
