package door

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
)

// reviewClients are the REST clients of the reviews the door asks the API
// server for: TokenReviews (authentication.k8s.io/v1), SubjectAccessReviews
// and SelfSubjectAccessReviews (authorization.k8s.io/v1).
//
// They are client-go's REST clients configured as its typed clients
// configure theirs, with a scheme of these two group versions only: the
// typed clients (k8s.io/client-go/kubernetes/typed/...) and k8s.io/apiserver's
// webhook authenticator and authorizer, which take them, link client-go's
// scheme of every API group, and the webhook packages k8s.io/component-base's
// global metrics, OpenTelemetry and CEL; together about 32 MB of binary and
// 20 MB of idle memory in every podsapi-server, door or not
// (docs/kubeapi-door.md).
type reviewClients struct {
	authentication, authorization rest.Interface
}

// newReviewClients returns the review clients of the API server of cfg,
// with its credentials. The scheme is built here, when a door asks for
// reviews, not at the start of every podsapi-server.
func newReviewClients(cfg *rest.Config) (*reviewClients, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{authenticationv1.AddToScheme, authorizationv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	codecs := rest.CodecFactoryForGeneratedClient(scheme, serializer.NewCodecFactory(scheme)).WithoutConversion()
	c := rest.CopyConfig(cfg)
	c.APIPath = "/apis"
	c.NegotiatedSerializer = codecs
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	httpClient, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, err
	}
	client := func(gv schema.GroupVersion) (rest.Interface, error) {
		c := rest.CopyConfig(c)
		c.GroupVersion = &gv
		return rest.RESTClientForConfigAndClient(c, httpClient)
	}
	rc := &reviewClients{}
	if rc.authentication, err = client(authenticationv1.SchemeGroupVersion); err != nil {
		return nil, fmt.Errorf("client of TokenReviews: %w", err)
	}
	if rc.authorization, err = client(authorizationv1.SchemeGroupVersion); err != nil {
		return nil, fmt.Errorf("client of SubjectAccessReviews: %w", err)
	}
	return rc, nil
}

// create posts review to the resource of client (tokenreviews,
// subjectaccessreviews...) and decodes the API server's answer into out.
func create(ctx context.Context, client rest.Interface, resource string, review, out runtime.Object) error {
	return client.Post().Resource(resource).Body(review).Do(ctx).Into(out)
}

// retrying calls review until it succeeds, fails with an error that
// retrying cannot mend, or backoff's steps are spent, and returns the last
// error of review, as k8s.io/apiserver's webhooks retry theirs
// (webhook.WithExponentialBackoff with webhook.DefaultShouldRetry).
func retrying(ctx context.Context, backoff wait.Backoff, review func() error) error {
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(context.Context) (bool, error) {
		last = review()
		switch {
		case last == nil:
			return true, nil
		case transient(last):
			return false, nil
		default:
			return false, last
		}
	})
	switch {
	case last != nil:
		return last
	case err != nil:
		return fmt.Errorf("review call failed: %w", err)
	}
	return nil
}

// transient reports whether a review that failed with err may succeed if
// sent again: the connection lost, the API server's internal errors,
// timeouts and throttling, and any answer that asks to retry after a delay.
func transient(err error) bool {
	if utilnet.IsConnectionReset(err) || utilnet.IsHTTP2ConnectionLost(err) ||
		apierrors.IsInternalError(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) {
		return true
	}
	_, retry := apierrors.SuggestsClientDelay(err)
	return retry
}

// withTimeout bounds ctx by d, when positive.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}
