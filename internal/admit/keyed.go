package admit

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// DefaultMaxKeys is how many keys a KeyedLimiter keeps buckets for by
// default.
const DefaultMaxKeys = 4096

// sweepEvery is how often at most a full KeyedLimiter looks for buckets it
// can forget, so that a flood of new keys does not make every call walk
// them all.
const sweepEvery = time.Second

// KeyedLimiter keeps a token bucket for each key (a client of the socket,
// a user of the Kubernetes API, a source address), so that what one key
// spends is its own and never another's: of a fixed rate
// (NewKeyedLimiter), or of a fair share of a shared rate among the keys
// calling (NewFairShareLimiter, fairshare.go). It is the one keyed rate
// limit of podsapi: the socket's per-client limit and the Kubernetes API's
// review budgets use it.
//
// It keeps at most its bound of keys (DefaultMaxKeys unless WithMaxKeys).
// A key whose bucket is full again (and, with a fair share, that has not
// called for fairWindow) is indistinguishable from a new one and is
// forgotten when room is needed. Past the bound, with every bucket in use,
// a new key is refused until one refills: a key already kept is never
// starved by others, and keeping the bound full costs a flood a call a
// second per key of the bound.
//
// A nil *KeyedLimiter allows everything.
type KeyedLimiter struct {
	qps   rate.Limit
	burst int
	max   int
	// fair makes the buckets the shares of qps and burst among the keys
	// that called within fairWindow.
	fair bool
	// now is the clock.
	now func() time.Time

	mu        sync.Mutex
	buckets   map[string]*keyBucket
	lastSweep time.Time
}

// keyBucket is one key's bucket, and when it last called.
type keyBucket struct {
	lim  *rate.Limiter
	last time.Time
}

// KeyedOption configures a KeyedLimiter.
type KeyedOption func(*KeyedLimiter)

// WithMaxKeys bounds the keys kept (default DefaultMaxKeys; 0 or less keeps
// the default).
func WithMaxKeys(n int) KeyedOption {
	return func(l *KeyedLimiter) {
		if n > 0 {
			l.max = n
		}
	}
}

// NewKeyedLimiter returns buckets of qps and burst per key. A qps of 0 or
// less means no limit: it returns nil, which allows everything.
func NewKeyedLimiter(qps float64, burst int, opts ...KeyedOption) *KeyedLimiter {
	if qps <= 0 {
		return nil
	}
	l := &KeyedLimiter{qps: rate.Limit(qps), burst: burst, max: DefaultMaxKeys, now: time.Now, buckets: make(map[string]*keyBucket)}
	for _, o := range opts {
		o(l)
	}
	return l
}

// Allow reports whether key may make a request now, taking a token of its
// bucket if so.
func (l *KeyedLimiter) Allow(key string) bool {
	if l == nil {
		return true
	}
	now := l.now()
	l.mu.Lock()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= l.max && now.Sub(l.lastSweep) >= sweepEvery {
			l.lastSweep = now
			for k, v := range l.buckets {
				if l.idle(now, v) {
					delete(l.buckets, k)
				}
			}
		}
		if len(l.buckets) >= l.max {
			l.mu.Unlock()
			return false
		}
		b = &keyBucket{lim: rate.NewLimiter(l.qps, l.burst)}
		l.buckets[key] = b
	}
	b.last = now
	if l.fair && !l.share(now, b) {
		l.mu.Unlock()
		return true
	}
	l.mu.Unlock()
	return b.lim.AllowN(now, 1)
}

// idle reports whether b can be forgotten at now: full again, and (with a
// fair share) not counted among the keys calling. l.mu is held.
func (l *KeyedLimiter) idle(now time.Time, b *keyBucket) bool {
	return b.lim.TokensAt(now) >= float64(b.lim.Burst()) && (!l.fair || now.Sub(b.last) >= fairWindow)
}

// Keys returns how many keys l keeps now.
func (l *KeyedLimiter) Keys() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
