// Package loglimit decides which of many repeated log lines are written: at
// most one per key every interval, the others counted and reported by the
// next line written for the key. The peer guard keys its warnings by client
// UID and message, the pod sources by reason, so that neither a hostile
// client nor a bad upstream can fill the logs.
package loglimit

import (
	"sync"
	"time"
)

// MaxKeys bounds the keys a Limiter remembers; beyond it, the keys whose
// interval has passed are forgotten, and if none has, lines of new keys are
// not written rather than memory grown.
const MaxKeys = 4096

// Limiter decides, for each key, whether a line may be written now. It is
// safe for concurrent use. The zero value is not ready: use New.
type Limiter[K comparable] struct {
	interval time.Duration

	mu   sync.Mutex
	keys map[K]*state
}

type state struct {
	last       time.Time
	suppressed int
}

// New returns a Limiter allowing one line per key every interval.
func New[K comparable](interval time.Duration) *Limiter[K] {
	return &Limiter[K]{interval: interval, keys: make(map[K]*state)}
}

// Allow reports whether a line for key may be written now and, if so, how
// many lines for key it refused since the last one it allowed, for the
// line to report (as suppressed=N).
func (l *Limiter[K]) Allow(key K) (ok bool, suppressed int) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	st, found := l.keys[key]
	switch {
	case !found:
		if len(l.keys) >= MaxKeys {
			for k, v := range l.keys {
				if now.Sub(v.last) >= l.interval {
					delete(l.keys, k)
				}
			}
		}
		if len(l.keys) >= MaxKeys {
			return false, 0
		}
		st = &state{}
		l.keys[key] = st
	case now.Sub(st.last) < l.interval:
		st.suppressed++
		return false, 0
	}
	suppressed = st.suppressed
	st.last, st.suppressed = now, 0
	return true, suppressed
}
