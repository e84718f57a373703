package door

import (
	"context"
	"errors"
	"net/http"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/podsapi/podsapi/kubeapi"
)

// withAuthorization allows a request for the node's pods when its user is
// allowed any one of the accesses it needs, tried in order, and refuses it
// otherwise: 403 as the API server words it, 503 when the API server could
// not say, 429 when the user's budget of reviews is spent. A socket peer
// (no user) needs none; nor does a request that needs no access.
func (d *Door) withAuthorization(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		info := infoFrom(ctx)
		if info.user == nil || len(info.accesses) == 0 {
			d.served(w, r, next)
			return
		}
		var (
			unavailable, throttled bool
			reason                 string
		)
		for i, a := range info.accesses {
			decision, why, err := d.authorize(ctx, info.user, a, r.URL.Path)
			if decision == authorizer.DecisionAllow {
				d.served(w, r, next)
				return
			}
			switch {
			case errors.Is(err, errReviewThrottled):
				throttled = true
			case err != nil:
				unavailable = true
				if ok, suppressed := d.warnings.Allow("authorization"); ok {
					d.logger.Warn("Kubernetes API: a SubjectAccessReview failed; the request is refused 503", "user", info.user.GetName(),
						"verb", a.Verb, "resource", a.Resource, "error", err, "suppressed", suppressed)
				}
			}
			if i == 0 {
				reason = why
			}
		}
		switch {
		case throttled:
			// One of the accesses might have been allowed: the user's
			// budget kept it from being asked.
			d.auth.budget.tarpit.Wait(ctx)
			writeStatus(w, errReviewThrottledStatus())
		case unavailable:
			// One of the accesses might have been allowed: the API server
			// could not say.
			writeStatus(w, errAuthorizationUnavailable())
		default:
			writeStatus(w, errForbidden(info.user.GetName(), info.accesses[0], reason))
		}
	})
}

// served marks r as an authenticated caller's work, which keeps its
// connection from being shed while it runs (httpguard), and serves r.
func (d *Door) served(w http.ResponseWriter, r *http.Request, next http.Handler) {
	authenticated(r)
	next.ServeHTTP(w, r)
}

// authorize decides whether u may have access a, asking first without the
// access's selectors: an access allowed without them is allowed with any
// (a selector only narrows what is read), so that a caller varying its
// selectors gets the one cached decision, and a review per selector is
// asked only of a caller allowed nothing broader (the Node authorizer
// allows a node's own pods by spec.nodeName alone, KEP-4601).
func (d *Door) authorize(ctx context.Context, u user.Info, a kubeapi.Access, path string) (authorizer.Decision, string, error) {
	attrs := authorizer.AttributesRecord{User: u, Verb: a.Verb, Path: a.Path}
	if a.Path == "" {
		attrs.Namespace, attrs.APIGroup, attrs.APIVersion, attrs.Resource, attrs.Subresource, attrs.Name =
			a.Namespace, a.Group, "v1", a.Resource, a.Subresource, a.Name
		attrs.ResourceRequest, attrs.Path = true, path
	}
	decision, why, err := d.auth.authorizer.Authorize(ctx, attrs)
	if decision == authorizer.DecisionAllow || (a.FieldSelector == "" && a.LabelSelector == "") || errors.Is(err, errReviewThrottled) {
		return decision, why, err
	}
	selectors(&attrs, a)
	return d.auth.authorizer.Authorize(ctx, attrs)
}

// selectors gives attrs the field and label selectors of a list or watch,
// parsed as the API server parses them for its own authorizers, so that a
// SubjectAccessReview carries them (KEP-4601): an authorizer that allows a
// caller only the pods of its node (the Node authorizer, a webhook) allows
// it here as it would there.
func selectors(attrs *authorizer.AttributesRecord, a kubeapi.Access) {
	if a.FieldSelector != "" {
		if sel, err := fields.ParseSelector(a.FieldSelector); err != nil {
			attrs.FieldSelectorParsingErr = err
		} else {
			attrs.FieldSelectorRequirements = sel.Requirements()
		}
	}
	if a.LabelSelector != "" {
		if sel, err := labels.Parse(a.LabelSelector); err != nil {
			attrs.LabelSelectorParsingErr = err
		} else {
			attrs.LabelSelectorRequirements, _ = sel.Requirements()
		}
	}
}
