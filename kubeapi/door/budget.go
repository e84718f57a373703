package door

import (
	"context"
	"crypto/sha256"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/podsapi/podsapi/guard"
	"github.com/podsapi/podsapi/internal/admit"
)

// The defaults of the review budgets (ReviewBudgets), a second; each
// budget's burst is twice its rate.
const (
	// DefaultReviewQPS bounds the TokenReviews and SubjectAccessReviews
	// the door sends for its callers, in all: below the review client's
	// own limit (50 a second, burst 100, set by Open), so that what is
	// refused is refused here, by whom it is for, and never waits in the
	// client's limiter behind another caller's reviews; the rest is left
	// for the issuer's keys and the shared informers.
	DefaultReviewQPS = 40
	// DefaultReviewQPSPerUser bounds the reviews sent for one identity:
	// the SubjectAccessReviews of an authenticated user (by name), and
	// the TokenReviews of the tokens signed by the cluster's issuer for
	// one subject.
	DefaultReviewQPSPerUser = 10
	// DefaultReviewQPSPerAddress bounds the TokenReviews of tokens not
	// seen authenticated that only a review can tell (not a JWT of the
	// cluster's issuer: static, bootstrap or webhook tokens) sent for one
	// source address: a pod sending garbage in a loop spends its own
	// budget, not its neighbours'. The service-account tokens of callers
	// on the same address are verified by their signature, and need none
	// of it.
	DefaultReviewQPSPerAddress = 5
)

// The review budget's other constants.
const (
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

// ReviewBudgets are the rates (a second; each burst twice as many) of the
// reviews the door sends to the API server for its callers. Every one of
// them is shared fairly among the identities and addresses calling
// (admit.NewFairShareLimiter): while n of them call, each may take a
// n-th of Total, so that no account, however many service accounts it
// mints tokens for, can starve another; the tokens only a review can tell
// take at most half of Total in all. A rate of 0 or less is no bound.
type ReviewBudgets struct {
	// Total bounds every review sent (default DefaultReviewQPS).
	Total float64
	// PerUser bounds those of one identity, even alone (default
	// DefaultReviewQPSPerUser).
	PerUser float64
	// PerAddress bounds those of the unknown tokens of one source address
	// (default DefaultReviewQPSPerAddress).
	PerAddress float64
}

// DefaultReviewBudgets returns the budgets of the defaults above.
func DefaultReviewBudgets() ReviewBudgets {
	return ReviewBudgets{Total: DefaultReviewQPS, PerUser: DefaultReviewQPSPerUser, PerAddress: DefaultReviewQPSPerAddress}
}

// burstOf is the burst of a budget of qps: twice as many, at least 1.
func burstOf(qps float64) int { return max(1, int(math.Ceil(2*qps))) }

// limiterOf returns a token bucket of qps and burstOf(qps), or one that
// allows everything when qps is 0 or less.
func limiterOf(qps float64) *rate.Limiter {
	if qps <= 0 {
		return rate.NewLimiter(rate.Inf, 0)
	}
	return rate.NewLimiter(rate.Limit(qps), burstOf(qps))
}

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

// reviewBudget keeps the reviews of some callers from starving those of
// others, as the API server keeps garbage from costing it: a token of the
// cluster's issuer is checked against the issuer's keys first
// (issuerKeys), so that a forged one costs no review and a signed one is
// reviewed within its subject's budget (allowUser, which the
// SubjectAccessReviews of that user share); an opaque token is reviewed
// within its source address's budget (allowAddress). Both are fair shares
// of one total (ReviewBudgets). A token seen authenticated needs no
// budget.
type reviewBudget struct {
	keys *issuerKeys
	// fair is each identity's ("user/" and its name) and each address's
	// ("addr/" and the address) fair share of total.
	fair *admit.KeyedLimiter
	// perUser and perAddress cap an identity's and an address's reviews.
	perUser, perAddress *admit.KeyedLimiter
	// unknown is the reviews of tokens not known, at most half of total;
	// total, every review.
	unknown, total *rate.Limiter
	tarpit         *guard.Tarpit
	ttl            time.Duration
	now            func() time.Time

	mu    sync.Mutex
	known map[[sha256.Size]byte]knownToken
}

// knownToken is a token seen authenticated: when, and as whom.
type knownToken struct {
	at   time.Time
	user string
}

func newReviewBudget(ttl time.Duration, keys *issuerKeys, budgets ReviewBudgets) *reviewBudget {
	return &reviewBudget{
		keys:       keys,
		fair:       admit.NewFairShareLimiter(budgets.Total, burstOf(budgets.Total)),
		perUser:    admit.NewKeyedLimiter(budgets.PerUser, burstOf(budgets.PerUser)),
		perAddress: admit.NewKeyedLimiter(budgets.PerAddress, burstOf(budgets.PerAddress)),
		unknown:    limiterOf(budgets.Total / 2),
		total:      limiterOf(budgets.Total),
		tarpit:     guard.NewTarpit(refusalDelay, maxDelayedRefusals),
		ttl:        ttl, now: time.Now,
		known: make(map[[sha256.Size]byte]knownToken),
	}
}

// allowUser reports whether a review may be sent now for user (a
// SubjectAccessReview of it, or the TokenReview of a token signed for it),
// taking it from its budget if so. A nil budget allows everything.
func (b *reviewBudget) allowUser(user string) bool {
	if b == nil {
		return true
	}
	return b.perUser.Allow(user) && b.fair.Allow("user/"+user) && b.total.Allow()
}

// allowAddress reports whether a TokenReview of a token that only a review
// can tell may be sent now for a caller at source, taking it from its
// budget if so.
func (b *reviewBudget) allowAddress(source string) bool {
	return b.perAddress.Allow(source) && b.fair.Allow("addr/"+source) && b.unknown.Allow() && b.total.Allow()
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
		if !b.allowUser(subject) {
			return tokenThrottled, subject
		}
		return tokenReviewed, subject
	}
	if !b.allowAddress(source) {
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
