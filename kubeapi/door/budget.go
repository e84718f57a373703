package door

import (
	"context"
	"crypto/sha256"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// The defaults of the TokenReviews of tokens the door has not seen
// authenticated (reviewBudget).
const (
	// DefaultUnknownTokenQPS and DefaultUnknownTokenBurst are the
	// TokenReviews of unknown tokens sent for one source address: a pod
	// sending garbage tokens in a loop spends its own budget, not its
	// neighbours'.
	DefaultUnknownTokenQPS   = 5
	DefaultUnknownTokenBurst = 10
	// DefaultUnknownTokenTotalQPS and DefaultUnknownTokenTotalBurst bound
	// the TokenReviews of unknown tokens of all sources: half of the
	// review client's own limit (50 a second, burst 100, set by Open), so
	// that the other half is left for the SubjectAccessReviews and the
	// reviews of tokens already seen, whose answers have expired.
	DefaultUnknownTokenTotalQPS   = 25
	DefaultUnknownTokenTotalBurst = 50
	// maxBudgetSources bounds the per-source buckets kept; beyond it those
	// with a full bucket (indistinguishable from new ones) are forgotten,
	// and if none is, a new source shares the bucket of the empty address.
	maxBudgetSources = 4096
	// refusalDelay is how long a request refused for lack of budget waits
	// before its 429 (its Retry-After), as the gRPC socket's refusals wait
	// (--rate-limit-delay): a pod sending unknown tokens in a loop gets
	// one answer a second per request it keeps open, rather than taking
	// the CPUs from valid callers with thousands of refusals. At most
	// maxDelayedRefusals wait at once; beyond, they are answered at once.
	refusalDelay       = time.Second
	maxDelayedRefusals = 1024
	// maxKnownTokens bounds the tokens remembered as authenticated (their
	// SHA-256 and when they were); beyond it, the expired are forgotten,
	// then the whole set.
	maxKnownTokens = 16384
)

// reviewBudget keeps the TokenReviews of tokens the door has not seen
// authenticated from starving those of valid ones: each source address
// (each pod) has its own budget of reviews of unknown tokens, and all
// share a total below the review client's limit. A token seen
// authenticated within the token cache's TTL needs no budget (its answer
// is usually cached, and a review of it is a valid caller's). A request
// refused for lack of budget is answered 429 with Retry-After, which
// client-go retries, never 401: the API server was not asked.
type reviewBudget struct {
	qps   rate.Limit
	burst int
	total *rate.Limiter
	ttl   time.Duration
	now   func() time.Time

	// delayed holds a slot per refusal waiting (tarpit).
	delayed chan struct{}

	mu      sync.Mutex
	sources map[string]*rate.Limiter
	known   map[[sha256.Size]byte]time.Time
}

func newReviewBudget(ttl time.Duration) *reviewBudget {
	return &reviewBudget{
		qps: DefaultUnknownTokenQPS, burst: DefaultUnknownTokenBurst,
		total: rate.NewLimiter(DefaultUnknownTokenTotalQPS, DefaultUnknownTokenTotalBurst),
		ttl:   ttl, now: time.Now, delayed: make(chan struct{}, maxDelayedRefusals),
		sources: make(map[string]*rate.Limiter), known: make(map[[sha256.Size]byte]time.Time),
	}
}

// allow reports whether a request from source with token may be
// authenticated now: a known token always may; an unknown one takes a
// review from its source's budget and from the total.
func (b *reviewBudget) allow(source, token string) bool {
	now := b.now()
	sum := sha256.Sum256([]byte(token))
	b.mu.Lock()
	if at, ok := b.known[sum]; ok && now.Sub(at) < b.ttl {
		b.mu.Unlock()
		return true
	}
	lim, ok := b.sources[source]
	if !ok {
		if len(b.sources) >= maxBudgetSources {
			for k, v := range b.sources {
				if v.TokensAt(now) >= float64(v.Burst()) {
					delete(b.sources, k)
				}
			}
		}
		if len(b.sources) >= maxBudgetSources {
			source = ""
			lim = b.sources[source]
		}
		if lim == nil {
			lim = rate.NewLimiter(b.qps, b.burst)
			b.sources[source] = lim
		}
	}
	b.mu.Unlock()
	if !lim.AllowN(now, 1) {
		return false
	}
	return b.total.AllowN(now, 1)
}

// tarpit waits refusalDelay before a refusal is answered, unless ctx ends
// first or maxDelayedRefusals already wait.
func (b *reviewBudget) tarpit(ctx context.Context) {
	select {
	case b.delayed <- struct{}{}:
	default:
		return
	}
	defer func() { <-b.delayed }()
	t := time.NewTimer(refusalDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// authenticated remembers token as authenticated now.
func (b *reviewBudget) authenticated(token string) {
	now := b.now()
	sum := sha256.Sum256([]byte(token))
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.known[sum]; !ok && len(b.known) >= maxKnownTokens {
		for k, at := range b.known {
			if now.Sub(at) >= b.ttl {
				delete(b.known, k)
			}
		}
		if len(b.known) >= maxKnownTokens {
			clear(b.known)
		}
	}
	b.known[sum] = now
}

// bearerToken returns the bearer token of r, as the authenticators read
// it (its Authorization header, or a WebSocket subprotocol), or "".
func bearerToken(r *http.Request) string {
	if auth := strings.TrimSpace(r.Header.Get("Authorization")); auth != "" {
		scheme, token, ok := strings.Cut(auth, " ")
		if ok && strings.EqualFold(scheme, "bearer") {
			return strings.TrimSpace(token)
		}
		return ""
	}
	const prefix = "base64url.bearer.authorization.k8s.io."
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(v, ",") {
			if p = strings.TrimSpace(p); strings.HasPrefix(p, prefix) {
				return p
			}
		}
	}
	return ""
}

// sourceOf returns the source address of r (its host, without the port).
func sourceOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
