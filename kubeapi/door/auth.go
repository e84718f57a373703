package door

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
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
func reviewBackoff() *wait.Backoff {
	return &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
}

// Auth authenticates the callers of the door and authorizes their
// requests for the node's pods, as the kubelet does: k8s.io/apiserver's
// delegating authenticator (TokenReview, and x509 client certificates
// signed by a client CA) and delegating authorizer (SubjectAccessReview),
// with their caches.
type Auth struct {
	authenticator authenticator.Request
	authorizer    authorizer.UnconditionalAuthorizer
	clientCA      *dynamiccertificates.DynamicFileCAContent
}

// AuthOption configures NewAuth.
type AuthOption func(*authConfig)

type authConfig struct {
	clientCAFile          string
	tokenTTL, allow, deny time.Duration
	reviewTimeout         time.Duration
}

// WithClientCAFile accepts client certificates signed by a CA of the PEM
// file at path (reloaded when it changes, while Auth.Run runs), naming
// their user by the certificate's common name and groups by its
// organizations, as the kubelet's --client-ca-file. By default client
// certificates are not accepted.
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

// NewAuth returns the authentication and authorization of the door, asking
// the API server of client (podsapi's own client, which needs the rights
// of the ClusterRole system:auth-delegator) for TokenReviews and
// SubjectAccessReviews. With a nil client, only client certificates are
// authenticated, and nothing is authorized: NewAuth then returns an error.
func NewAuth(client kubernetes.Interface, opts ...AuthOption) (*Auth, error) {
	c := authConfig{tokenTTL: DefaultTokenCacheTTL, allow: DefaultAllowCacheTTL, deny: DefaultDenyCacheTTL, reviewTimeout: DefaultReviewTimeout}
	for _, o := range opts {
		o(&c)
	}
	if client == nil {
		return nil, errors.New("no API server to send TokenReviews and SubjectAccessReviews to")
	}
	a := &Auth{}
	authn := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                &apiserver.AnonymousAuthConfig{Enabled: false},
		TokenAccessReviewClient:  client.AuthenticationV1(),
		TokenAccessReviewTimeout: c.reviewTimeout,
		WebhookRetryBackoff:      reviewBackoff(),
		CacheTTL:                 c.tokenTTL,
	}
	if c.clientCAFile != "" {
		ca, err := dynamiccertificates.NewDynamicCAContentFromFile("kube-api-client-ca", c.clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("client CA: %w", err)
		}
		a.clientCA = ca
		authn.ClientCertificateCAContentProvider = ca
	}
	var err error
	if a.authenticator, _, err = authn.New(); err != nil {
		return nil, fmt.Errorf("authenticator: %w", err)
	}
	authz := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: client.AuthorizationV1(),
		AllowCacheTTL:             c.allow,
		DenyCacheTTL:              c.deny,
		WebhookRetryBackoff:       reviewBackoff(),
	}
	if a.authorizer, err = authz.New(); err != nil {
		return nil, fmt.Errorf("authorizer: %w", err)
	}
	return a, nil
}

// Run reloads the client CA file when it changes, until ctx is done. It
// returns at once without one.
func (a *Auth) Run(ctx context.Context) {
	if a.clientCA != nil {
		a.clientCA.Run(ctx, 1)
	}
}
