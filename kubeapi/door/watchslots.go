package door

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sync"
)

// DefaultMaxWatchesPerCaller is the share of the door's watches one caller
// may hold open at once by default: the gRPC socket's per-client share
// (server.DefaultMaxWatchersPerClient).
const DefaultMaxWatchesPerCaller = 1000

// watchSlots bounds the local watches open at once, and the share of them
// one caller holds (an authenticated user, by name; a peer of the UNIX
// socket, by guard.Peer.Client), as the gRPC socket's guard.WatchLimit
// does: one account's watches cannot fill the door and lock others out.
type watchSlots struct {
	max, perCaller int // <= 0: no bound

	mu       sync.Mutex
	open     int
	byCaller map[string]int
}

// acquire takes a slot for a watch of caller, returning how to give it
// back, or the error that refuses it: the door's bound, or the caller's
// share.
func (s *watchSlots) acquire(caller string) (release func(), err *apierrors.StatusError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.max > 0 && s.open >= s.max {
		return nil, errTooManyWatches(s.max, false)
	}
	if s.perCaller > 0 && s.byCaller[caller] >= s.perCaller {
		return nil, errTooManyWatches(s.perCaller, true)
	}
	s.open++
	if s.byCaller == nil {
		s.byCaller = make(map[string]int)
	}
	s.byCaller[caller]++
	return sync.OnceFunc(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.open--
		if s.byCaller[caller]--; s.byCaller[caller] <= 0 {
			delete(s.byCaller, caller)
		}
	}), nil
}
