package door

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authentication/request/websocket"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	tokencache "k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/rest"
)

// The kubelet's defaults for its own cached TokenReviews and
// SubjectAccessReviews (its --authentication-token-webhook-cache-ttl,
// --authorization-webhook-cache-authorized-ttl and
// --authorization-webhook-cache-unauthorized-ttl). They are also how long
// a decision keeps working while the API server is unreachable: an answer
// is kept for its TTL from when the API server gave it, whatever happens to
// the API server meanwhile, and never longer.
const (
	DefaultTokenCacheTTL = 2 * time.Minute
	DefaultAllowCacheTTL = 5 * time.Minute
	DefaultDenyCacheTTL  = 30 * time.Second
)

// DefaultReviewTimeout bounds each TokenReview and SubjectAccessReview sent
// to the API server (before the library's retries, about 4 s more of
// backoff in all).
const DefaultReviewTimeout = 10 * time.Second

// reviewBackoff is the retries of a review that failed: the API server's
// own for its webhooks (k8s.io/apiserver's DefaultAuthWebhookRetryBackoff,
// whose package would link the whole generic API server): 5 tries, 0.5 s
// apart growing by half each time, about 4 s in all.
func reviewBackoff() wait.Backoff {
	return wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
}

// Auth authenticates the callers of the door and authorizes their
// requests for the node's pods, as the kubelet does, with the pieces of
// k8s.io/apiserver that its delegating authenticator and authorizer are
// made of: bearer tokens reviewed by TokenReviews with their answers
// cached (its token cache), x509 client certificates signed by a client
// CA, the group system:authenticated added (what authenticatorfactory's
// DelegatingAuthenticatorConfig assembles, without its front-proxy
// authenticator), and SubjectAccessReviews with their answers cached, as
// authorizerfactory's DelegatingAuthorizerConfig asks them.
//
// The TokenReviews and SubjectAccessReviews themselves are sent here
// (tokenReviews, accessReviews) rather than by k8s.io/apiserver's webhook
// authenticator and authorizer, which would link client-go's clientset
// (every API group's types), k8s.io/component-base's global metrics,
// OpenTelemetry and CEL into every podsapi-server, door or not: twice its
// binary and 20 MB more of idle memory (docs/kubeapi-door.md).
type Auth struct {
	// certs authenticates client certificates (nil: none are accepted);
	// authenticator, bearer tokens. A certificate is tried first, as the
	// API server's union tries it (withAuthentication).
	certs         authenticator.Request
	authenticator authenticator.Request
	authorizer    authorizer.UnconditionalAuthorizer
	// reviews asks the API server what podsapi itself may do (Check).
	reviews rest.Interface
	// budget shares the TokenReviews of tokens not seen authenticated.
	budget *reviewBudget
}

// errReviewThrottled marks a review not sent for lack of budget (its
// user's, its source's) or because the review client's own rate limit
// would wait past the deadline: the caller is answered 429, to retry, not
// 401 or 503.
var errReviewThrottled = errors.New("too many reviews to send now")

// AuthOption configures NewAuth.
type AuthOption func(*authConfig)

type authConfig struct {
	clientCAFile          string
	tokenTTL, allow, deny time.Duration
	reviewTimeout         time.Duration
	budgets               ReviewBudgets
}

// WithClientCAFile accepts client certificates signed by a CA of the PEM
// file at path (read again when it changes), naming their user by the
// certificate's common name and groups by its organizations, as the
// kubelet's --client-ca-file. By default client certificates are not
// accepted.
func WithClientCAFile(path string) AuthOption { return func(c *authConfig) { c.clientCAFile = path } }

// WithCacheTTLs sets how long an answer of the API server is cached: a
// TokenReview's (default DefaultTokenCacheTTL), a SubjectAccessReview that
// allowed (DefaultAllowCacheTTL) and one that did not (DefaultDenyCacheTTL).
// Zero keeps a default.
func WithCacheTTLs(token, allow, deny time.Duration) AuthOption {
	return func(c *authConfig) {
		for _, p := range []struct {
			dst *time.Duration
			v   time.Duration
		}{{&c.tokenTTL, token}, {&c.allow, allow}, {&c.deny, deny}} {
			if p.v != 0 {
				*p.dst = p.v
			}
		}
	}
}

// WithReviewBudgets sets the budgets of the reviews sent for the callers
// (default DefaultReviewBudgets); a rate of 0 or less is no bound.
func WithReviewBudgets(b ReviewBudgets) AuthOption { return func(c *authConfig) { c.budgets = b } }

// NewAuth returns the authentication and authorization of the door, asking
// the API server of cfg, with cfg's credentials (podsapi's own, which need
// the rights of the ClusterRole system:auth-delegator), for TokenReviews
// and SubjectAccessReviews.
func NewAuth(cfg *rest.Config, opts ...AuthOption) (*Auth, error) {
	c := authConfig{tokenTTL: DefaultTokenCacheTTL, allow: DefaultAllowCacheTTL, deny: DefaultDenyCacheTTL, reviewTimeout: DefaultReviewTimeout,
		budgets: DefaultReviewBudgets()}
	for _, o := range opts {
		o(&c)
	}
	if cfg == nil {
		return nil, errors.New("no API server to send TokenReviews and SubjectAccessReviews to")
	}
	clients, err := newReviewClients(cfg)
	if err != nil {
		return nil, err
	}
	tokens := &tokenReviews{client: clients.authentication, backoff: reviewBackoff(), timeout: c.reviewTimeout}
	budget := newReviewBudget(c.tokenTTL, newIssuerKeys(clients.authentication), c.budgets)
	// Answers cached for the TTL, rejections too; errors (the API server
	// unreachable) are not.
	cached := tokencache.New(tokens, false, c.tokenTTL, c.tokenTTL)
	var certs authenticator.Request
	if c.clientCAFile != "" {
		ca, err := newReloaded(parseClientCA, c.clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("client CA: %w", err)
		}
		certs = group.NewAuthenticatedGroupAdder(x509request.NewDynamic(func() (x509.VerifyOptions, bool) { return ca.get(), true }, x509request.CommonNameUserConversion))
	}
	return &Auth{
		certs:         certs,
		authenticator: group.NewAuthenticatedGroupAdder(union.New(bearertoken.New(cached), withoutAuthorization(websocket.NewProtocolAuthenticator(cached)))),
		authorizer:    newAccessReviews(clients.authorization, reviewBackoff(), c.reviewTimeout, c.allow, c.deny, budget),
		reviews:       clients.authorization,
		budget:        budget,
	}, nil
}

// parseClientCA returns the verification of client certificates against
// the CAs of a PEM file.
func parseClientCA(data [][]byte) (x509.VerifyOptions, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data[0]) {
		return x509.VerifyOptions{}, errors.New("no PEM certificate")
	}
	opts := x509request.DefaultVerifyOptions()
	opts.Roots = pool
	return opts, nil
}

// Check reads the keys of the cluster's service-account issuer, so that
// the first tokens are checked against them without waiting for them, then
// asks the API server whether podsapi's own account may create the
// TokenReviews and SubjectAccessReviews that Auth sends (the ClusterRole
// system:auth-delegator), and returns an error that says what it lacks:
// without them every caller is refused 401 or 503. Without the keys, every
// token is reviewed within the budget of its address.
func (a *Auth) Check(ctx context.Context) error {
	a.budget.keys.current(ctx, false)
	var missing []string
	for _, r := range []struct{ group, resource string }{
		{"authentication.k8s.io", "tokenreviews"}, {"authorization.k8s.io", "subjectaccessreviews"},
	} {
		var review authorizationv1.SelfSubjectAccessReview
		if err := create(ctx, a.reviews, "selfsubjectaccessreviews", &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Group: r.group, Resource: r.resource},
		}}, &review); err != nil {
			return fmt.Errorf("ask the API server what podsapi may do: %w", err)
		}
		if !review.Status.Allowed {
			missing = append(missing, "create "+r.resource+"."+r.group)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("podsapi's account may not %s: bind it to the ClusterRole system:auth-delegator (deploy/components/kube-api)", strings.Join(missing, " or "))
	}
	return nil
}

// withoutAuthorization consults a only for requests without an
// Authorization header: the token a review is sent for is then always the
// one bearerToken names and the review budget charged (budget.go), so that
// a request with another scheme in its Authorization header cannot have a
// WebSocket subprotocol's token reviewed outside the budget.
func withoutAuthorization(a authenticator.Request) authenticator.Request {
	return authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
		if r.Header.Get("Authorization") != "" {
			return nil, false, nil
		}
		return a.AuthenticateRequest(r)
	})
}
