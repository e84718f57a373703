package admit

import (
	"time"

	"golang.org/x/time/rate"
)

// fairWindow is how recently a client must have called to count among the
// clients that share the rate limit.
const fairWindow = time.Second

// NewFairShareLimiter returns per-client buckets that share qps and burst
// fairly among the clients calling: while n clients have called within the
// last second, each may take qps/n a second with a burst of burst/n (at
// least 1), so that a client calling in a loop takes its share of the
// shared bucket and no more, and leaves the others theirs. A client alone
// is not limited by its bucket at all: the shared bucket of qps and burst,
// checked after this one, is its limit, as without a share.
// A qps of 0 or less means no limit: it returns nil, which allows
// everything.
func NewFairShareLimiter(qps float64, burst int, opts ...KeyedOption) *KeyedLimiter {
	l := NewKeyedLimiter(qps, burst, opts...)
	if l != nil {
		l.fair = true
	}
	return l
}

// share sets b's bucket to its key's fair share at now and reports
// whether the share applies: false while its key is the only one that
// called within fairWindow. l.mu is held.
func (l *KeyedLimiter) share(now time.Time, b *keyBucket) bool {
	n := 0
	for _, o := range l.buckets {
		if now.Sub(o.last) < fairWindow {
			n++
		}
	}
	if n <= 1 {
		return false
	}
	b.lim.SetLimitAt(now, l.qps/rate.Limit(n))
	b.lim.SetBurstAt(now, max(1, l.burst/n))
	return true
}
