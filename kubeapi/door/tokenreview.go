package door

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/rest"
)

// tokenReviews authenticates bearer tokens by asking the API server for a
// TokenReview of each, as k8s.io/apiserver's webhook token authenticator
// does when it is given a client (webhook.NewFromInterface), without
// implicit audiences. Its answers are not cached here: NewAuth wraps it in
// k8s.io/apiserver's token cache.
type tokenReviews struct {
	client  rest.Interface
	backoff wait.Backoff
	timeout time.Duration
}

var _ authenticator.Token = (*tokenReviews)(nil)

// errReview marks the errors of a review the API server did not answer
// (unreachable, or failing), as opposed to its refusals.
var errReview = errors.New("the API server did not answer the review")

// AuthenticateToken implements authenticator.Token: the user the API
// server names for token, no user when it does not authenticate it (with
// the API server's reason as the error, if it gave one), or an error
// wrapping errReview when it could not be asked.
func (t *tokenReviews) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	// A request limited to audiences asks the API server for them, and is
	// authenticated only if the token is for one of them.
	wantAuds, checkAuds := authenticator.AudiencesFrom(ctx)
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: wantAuds}}
	ctx, cancel := withTimeout(ctx, t.timeout)
	defer cancel()
	var result authenticationv1.TokenReview
	if err := retrying(ctx, t.backoff, func() error {
		return create(ctx, t.client, "tokenreviews", review, &result)
	}); err != nil {
		if strings.Contains(err.Error(), "client rate limiter Wait returned an error") {
			// client-go's limiter of the reviews (Open) would wait past
			// the deadline: not sent, the token neither good nor bad.
			return nil, false, fmt.Errorf("%w: TokenReview: %w", errReviewThrottled, err)
		}
		return nil, false, fmt.Errorf("%w: TokenReview: %w", errReview, err)
	}
	var auds authenticator.Audiences
	if checkAuds {
		if auds = wantAuds.Intersect(result.Status.Audiences); len(auds) == 0 {
			return nil, false, nil
		}
	}
	st := result.Status
	if !st.Authenticated {
		if st.Error != "" {
			return nil, false, errors.New(st.Error)
		}
		return nil, false, nil
	}
	var extra map[string][]string
	if st.User.Extra != nil {
		extra = make(map[string][]string, len(st.User.Extra))
		for k, v := range st.User.Extra {
			extra[k] = v
		}
	}
	return &authenticator.Response{
		User:      &user.DefaultInfo{Name: st.User.Username, UID: st.User.UID, Groups: st.User.Groups, Extra: extra},
		Audiences: auds,
	}, true, nil
}
