package harness

import (
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
)

// sar is the review of the agent's first verb of rule r, cluster-wide.
func sar(a *Agent, r rbacv1.PolicyRule) *authorizationv1.SubjectAccessReview {
	group := ""
	if len(r.APIGroups) > 0 {
		group = r.APIGroups[0]
	}
	return &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   serviceaccount.MakeUsername(a.Namespace, a.Name),
		Groups: serviceaccount.MakeGroupNames(a.Namespace),
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: r.Verbs[0], Group: group, Resource: r.Resources[0],
		},
	}}
}
