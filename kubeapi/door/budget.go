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

	"github.com/podsapi/podsapi/guard"
	"github.com/podsapi/podsapi/internal/admit"
)

// The defaults of the review budgets (reviewBudget).
const (
	// DefaultReviewsPerUserQPS and DefaultReviewsPerUserBurst are the
	// reviews sent for one identity: the SubjectAccessReviews of an
	// authenticated user (by name), and the TokenReviews of the tokens
	// signed by the cluster's issuer for one subject. An account that
	// floods spends its own budget, never another's: a fifth of the
	// review client's own limit (50 a second, burst 100, set by Open).
	DefaultReviewsPerUserQPS   = 10
	DefaultReviewsPerUserBurst = 20
	// DefaultUnknownTokenQPS and DefaultUnknownTokenBurst are the
	// TokenReviews of opaque tokens not seen authenticated (not a JWT of
	// the cluster's issuer: static, bootstrap or webhook tokens) sent for
	// one source address: a pod sending garbage in a loop spends its own
	// budget, not its neighbours'. The service-account tokens of callers
	// on the same address are verified by their signature, and need none
	// of it.
	DefaultUnknownTokenQPS   = 5
	DefaultUnknownTokenBurst = 10
	// DefaultUnknownTokenTotalQPS and DefaultUnknownTokenTotalBurst bound
	// the TokenReviews of opaque tokens of all sources: half of the review
	// client's own limit, so that the other half is left for the
	// SubjectAccessReviews and the reviews of signed tokens.
	DefaultUnknownTokenTotalQPS   = 25
	DefaultUnknownTokenTotalBurst = 50
	// refusalDelay is how long a request refused for lack of budget waits
	// before its 429 (its Retry-After), as the gRPC socket's refusals wait
	// (--rate-limit-delay): a pod sending unknown tokens in a loop gets
	// one answer a second per request it keeps open, rather than taking
	// the CPUs from valid callers with thousands of refusals. At most
	// maxDelayedRefusals wait at once (guard.Tarpit); beyond, they are
	// answered at once.
	refusalDelay       = time.Second
	maxDelayedRefusals = 1024
	// maxKnownTokens bounds the tokens remembered as authenticated (their
	// SHA-256, when and as whom they were); beyond it, the expired are
	// forgotten, then the whole set.
	maxKnownTokens = 16384
)

// tokenVerdict is what reviewBudget.admit decides of a bearer token.
type tokenVerdict int

const (
	// tokenKnown: seen authenticated within the token cache's TTL; its
	// answer is usually cached, and a review of it is a valid caller's.
	tokenKnown tokenVerdict = iota
	// tokenReviewed: may be reviewed now, within its budget.
	tokenReviewed
	// tokenRefused: names the cluster's issuer but is not signed by it,
	// or expired: refused 401 without a review, as the API server would.
	tokenRefused
	// tokenThrottled: its budget is spent: refused 429 with Retry-After,
	// never 401, since the API server was not asked.
	tokenThrottled
)

// reviewBudget keeps the TokenReviews of tokens the door has not seen
// authenticated from starving those of valid callers, as the API server
// keeps garbage from costing it: a token of the cluster's issuer is checked
// against the issuer's keys first (issuerKeys), so that a forged one costs
// no review and a signed one is reviewed within its subject's budget
// (perUser, which the SubjectAccessReviews of that user share); an opaque
// token is reviewed within its source address's budget, all sources
// sharing a total below the review client's limit. A token seen
// authenticated needs no budget.
type reviewBudget struct {
	keys    *issuerKeys
	perUser *admit.KeyedLimiter
	sources *admit.KeyedLimiter
	total   *rate.Limiter
	tarpit  *guard.Tarpit
	ttl     time.Duration
	now     func() time.Time

	mu    sync.Mutex
	known map[[sha256.Size]byte]knownToken
}

// knownToken is a token seen authenticated: when, and as whom.
type knownToken struct {
	at   time.Time
	user string
}

func newReviewBudget(ttl time.Duration, keys *issuerKeys, perUser *admit.KeyedLimiter) *reviewBudget {
	return &reviewBudget{
		keys: keys, perUser: perUser,
		sources: admit.NewKeyedLimiter(DefaultUnknownTokenQPS, DefaultUnknownTokenBurst),
		total:   rate.NewLimiter(DefaultUnknownTokenTotalQPS, DefaultUnknownTokenTotalBurst),
		tarpit:  guard.NewTarpit(refusalDelay, maxDelayedRefusals),
		ttl:     ttl, now: time.Now,
		known: make(map[[sha256.Size]byte]knownToken),
	}
}

// admit decides whether a request from source with token may be
// authenticated now, and names its user when it is known already (a token
// seen authenticated, or the subject of a signed one).
func (b *reviewBudget) admit(ctx context.Context, source, token string) (tokenVerdict, string) {
	if user, ok := b.knownAs(token); ok {
		return tokenKnown, user
	}
	switch kind, subject := b.keys.classify(ctx, token); kind {
	case tokenForged:
		return tokenRefused, ""
	case tokenSigned:
		if !b.perUser.Allow(subject) {
			return tokenThrottled, subject
		}
		return tokenReviewed, subject
	}
	if !b.sources.Allow(source) || !b.total.Allow() {
		return tokenThrottled, ""
	}
	return tokenReviewed, ""
}

// callerOf names the caller of token without a review: the user it was
// seen authenticated as, the subject of a token signed by the cluster's
// issuer, or "" when only a review could tell.
func (b *reviewBudget) callerOf(ctx context.Context, token string) string {
	if user, ok := b.knownAs(token); ok {
		return user
	}
	if kind, subject := b.keys.classify(ctx, token); kind == tokenSigned {
		return subject
	}
	return ""
}

// knownAs returns the user token was seen authenticated as, within the
// token cache's TTL.
func (b *reviewBudget) knownAs(token string) (string, bool) {
	sum := sha256.Sum256([]byte(token))
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if k, ok := b.known[sum]; ok && now.Sub(k.at) < b.ttl {
		return k.user, true
	}
	return "", false
}

// authenticated remembers token as authenticated now, as user.
func (b *reviewBudget) authenticated(token, user string) {
	now := b.now()
	sum := sha256.Sum256([]byte(token))
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.known[sum]; !ok && len(b.known) >= maxKnownTokens {
		for k, t := range b.known {
			if now.Sub(t.at) >= b.ttl {
				delete(b.known, k)
			}
		}
		if len(b.known) >= maxKnownTokens {
			clear(b.known)
		}
	}
	b.known[sum] = knownToken{at: now, user: user}
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
