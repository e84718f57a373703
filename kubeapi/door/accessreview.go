package door

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/rest"
)

// accessCacheSize is how many answers of SubjectAccessReviews are cached,
// the most recently used kept: k8s.io/apiserver's webhook authorizer's
// size.
const accessCacheSize = 8192

// maxCachedAttrs bounds the length of the attributes that the caller
// chooses (namespace, verb, group, version, resource, subresource, name,
// path) of a decision that is cached, as k8s.io/apiserver's webhook
// authorizer bounds them: larger ones are asked every time.
const maxCachedAttrs = 10000

// accessReviews authorizes requests by asking the API server for a
// SubjectAccessReview of each, with its answers cached (allowed for
// allowTTL, not allowed for denyTTL, errors not at all), as k8s.io/apiserver's
// delegating authorizer does (authorizerfactory.DelegatingAuthorizerConfig:
// the webhook authorizer given a client, no match conditions, no opinion on
// errors).
//
// A review that is not cached is sent within its user's budget (budget,
// by name): an account asking reviews in a loop spends its own share and
// gets errReviewThrottled, never another's.
type accessReviews struct {
	client            rest.Interface
	backoff           wait.Backoff
	timeout           time.Duration
	allowTTL, denyTTL time.Duration
	answers           *cache.LRUExpireCache
	budget            userBudget
}

// userBudget is the budget of the reviews sent for each user
// (reviewBudget.allowUser); nil allows every review.
type userBudget interface {
	allowUser(user string) bool
}

var _ authorizer.UnconditionalAuthorizer = (*accessReviews)(nil)

func newAccessReviews(client rest.Interface, backoff wait.Backoff, timeout, allowTTL, denyTTL time.Duration, budget userBudget) *accessReviews {
	return &accessReviews{client: client, backoff: backoff, timeout: timeout, allowTTL: allowTTL, denyTTL: denyTTL,
		answers: cache.NewLRUExpireCache(accessCacheSize), budget: budget}
}

// Authorize implements authorizer.UnconditionalAuthorizer: allowed or
// denied as the API server answers, no opinion when it has none, and no
// opinion with an error wrapping errReview when it could not be asked, or
// errReviewThrottled when its user's budget is spent.
func (a *accessReviews) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	spec := accessReviewSpec(attrs)
	key, err := json.Marshal(spec)
	if err != nil {
		return authorizer.DecisionNoOpinion, "", err
	}
	var st authorizationv1.SubjectAccessReviewStatus
	if cached, ok := a.answers.Get(string(key)); ok {
		st = cached.(authorizationv1.SubjectAccessReviewStatus)
	} else {
		if a.budget != nil && !a.budget.allowUser(spec.User) {
			return authorizer.DecisionNoOpinion, "", fmt.Errorf("%w: SubjectAccessReviews of %s", errReviewThrottled, spec.User)
		}
		rctx, cancel := withTimeout(ctx, a.timeout)
		defer cancel()
		var result authorizationv1.SubjectAccessReview
		if err := retrying(rctx, a.backoff, func() error {
			return create(rctx, a.client, "subjectaccessreviews", &authorizationv1.SubjectAccessReview{Spec: spec}, &result)
		}); err != nil {
			return authorizer.DecisionNoOpinion, "", fmt.Errorf("%w: SubjectAccessReview: %w", errReview, err)
		}
		st = result.Status
		if cacheable(attrs) {
			ttl := a.denyTTL
			if st.Allowed {
				ttl = a.allowTTL
			}
			a.answers.Add(string(key), st, ttl)
		}
	}
	switch {
	case st.Denied && st.Allowed:
		return authorizer.DecisionDeny, st.Reason, errors.New("the SubjectAccessReview both allowed and denied")
	case st.Denied:
		return authorizer.DecisionDeny, st.Reason, nil
	case st.Allowed:
		return authorizer.DecisionAllow, st.Reason, nil
	}
	return authorizer.DecisionNoOpinion, st.Reason, nil
}

// cacheable reports whether the decision on attrs may be cached: whether
// the attributes its caller chose are short enough.
func cacheable(attrs authorizer.Attributes) bool {
	n := 0
	for _, s := range []string{attrs.GetNamespace(), attrs.GetVerb(), attrs.GetAPIGroup(), attrs.GetAPIVersion(),
		attrs.GetResource(), attrs.GetSubresource(), attrs.GetName(), attrs.GetPath()} {
		n += len(s)
	}
	return n < maxCachedAttrs
}

// accessReviewSpec is the SubjectAccessReview of attrs: its user, and its
// resource (with the selectors of a list or watch, KEP-4601) or its
// non-resource path.
func accessReviewSpec(attrs authorizer.Attributes) authorizationv1.SubjectAccessReviewSpec {
	var spec authorizationv1.SubjectAccessReviewSpec
	if u := attrs.GetUser(); u != nil {
		spec.User, spec.UID, spec.Groups = u.GetName(), u.GetUID(), u.GetGroups()
		if extra := u.GetExtra(); extra != nil {
			spec.Extra = make(map[string]authorizationv1.ExtraValue, len(extra))
			for k, v := range extra {
				spec.Extra[k] = v
			}
		}
	}
	if !attrs.IsResourceRequest() {
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: attrs.GetPath(), Verb: attrs.GetVerb()}
		return spec
	}
	ra := &authorizationv1.ResourceAttributes{
		Namespace: attrs.GetNamespace(), Verb: attrs.GetVerb(), Group: attrs.GetAPIGroup(), Version: attrs.GetAPIVersion(),
		Resource: attrs.GetResource(), Subresource: attrs.GetSubresource(), Name: attrs.GetName(),
	}
	if reqs := fieldRequirements(attrs); len(reqs) > 0 {
		ra.FieldSelector = &authorizationv1.FieldSelectorAttributes{Requirements: reqs}
	}
	if reqs := labelRequirements(attrs); len(reqs) > 0 {
		ra.LabelSelector = &authorizationv1.LabelSelectorAttributes{Requirements: reqs}
	}
	spec.ResourceAttributes = ra
	return spec
}

// fieldRequirements are the requirements of attrs' field selector that a
// SubjectAccessReview can carry, sorted and without repeats: they are
// ANDed, so their order and repeats change no decision, and a caller
// reordering them gets the cached one. Those a review cannot carry are
// left out: fewer ask for a broader access, never a narrower one.
// Requirements parsed before an error are kept, for the same reason.
func fieldRequirements(attrs authorizer.Attributes) []metav1.FieldSelectorRequirement {
	reqs, _ := attrs.GetFieldSelector()
	var out []metav1.FieldSelectorRequirement
	for _, r := range reqs {
		var op metav1.FieldSelectorOperator
		switch r.Operator {
		case selection.Equals, selection.DoubleEquals, selection.In:
			op = metav1.FieldSelectorOpIn
		case selection.NotEquals, selection.NotIn:
			op = metav1.FieldSelectorOpNotIn
		default:
			continue
		}
		out = append(out, metav1.FieldSelectorRequirement{Key: r.Field, Operator: op, Values: []string{r.Value}})
	}
	slices.SortFunc(out, func(a, b metav1.FieldSelectorRequirement) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Operator, b.Operator), slices.Compare(a.Values, b.Values))
	})
	return slices.CompactFunc(out, func(a, b metav1.FieldSelectorRequirement) bool {
		return a.Key == b.Key && a.Operator == b.Operator && slices.Equal(a.Values, b.Values)
	})
}

// labelRequirements are the requirements of attrs' label selector that a
// SubjectAccessReview can carry, sorted and without repeats (each one's
// values too), as fieldRequirements.
func labelRequirements(attrs authorizer.Attributes) []metav1.LabelSelectorRequirement {
	reqs, _ := attrs.GetLabelSelector()
	var out []metav1.LabelSelectorRequirement
	for _, r := range reqs {
		var op metav1.LabelSelectorOperator
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			op = metav1.LabelSelectorOpIn
		case selection.NotEquals, selection.NotIn:
			op = metav1.LabelSelectorOpNotIn
		case selection.Exists:
			op = metav1.LabelSelectorOpExists
		case selection.DoesNotExist:
			op = metav1.LabelSelectorOpDoesNotExist
		default:
			continue
		}
		req := metav1.LabelSelectorRequirement{Key: r.Key(), Operator: op}
		if values := r.ValuesUnsorted(); len(values) > 0 {
			slices.Sort(values)
			req.Values = slices.Compact(values)
		}
		out = append(out, req)
	}
	slices.SortFunc(out, func(a, b metav1.LabelSelectorRequirement) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Operator, b.Operator), slices.Compare(a.Values, b.Values))
	})
	return slices.CompactFunc(out, func(a, b metav1.LabelSelectorRequirement) bool {
		return a.Key == b.Key && a.Operator == b.Operator && slices.Equal(a.Values, b.Values)
	})
}
