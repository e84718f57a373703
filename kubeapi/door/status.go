package door

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/podsapi/podsapi/kubeapi"
)

// The errors of the door, each a metav1.Status as the API server writes it.
// They are built here and nowhere else.

// sanitizer keeps a message from looking like HTML, as the API server's.
var sanitizer = strings.NewReplacer(`&`, "&amp;", `<`, "&lt;", `>`, "&gt;")

// retryAfterSeconds is the Retry-After of the door's 503 answers.
const retryAfterSeconds = 1

// errUnauthorized is a caller that could not be authenticated: no
// credentials, a token or certificate the API server does not accept, or a
// token that cannot be verified now. The API server's own message, which
// tells nothing of why.
func errUnauthorized() *apierrors.StatusError {
	return apierrors.NewUnauthorized("Unauthorized")
}

// errForbidden is a caller denied every access a request needs, worded as
// the API server words it for the first one.
func errForbidden(user string, a kubeapi.Access, reason string) *apierrors.StatusError {
	if a.Path != "" {
		msg := fmt.Sprintf("User %q cannot %s path %q", user, a.Verb, a.Path)
		if reason != "" {
			msg += ": " + reason
		}
		return apierrors.NewForbidden(schema.GroupResource{}, "", fmt.Errorf("%s", sanitizer.Replace(msg)))
	}
	resource := a.Resource
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	msg := fmt.Sprintf("User %q cannot %s resource %q in API group %q", user, a.Verb, resource, a.Group)
	if a.Namespace != "" {
		msg += fmt.Sprintf(" in the namespace %q", a.Namespace)
	} else {
		msg += " at the cluster scope"
	}
	if reason != "" {
		msg += ": " + reason
	}
	return apierrors.NewForbidden(schema.GroupResource{Group: a.Group, Resource: a.Resource}, a.Name, fmt.Errorf("%s", sanitizer.Replace(msg)))
}

// errPeerForbidden is a UNIX-socket peer that the access policy does not
// allow.
func errPeerForbidden(uid uint32, known bool) *apierrors.StatusError {
	who := "a peer of unknown credentials"
	if known {
		who = "UID " + strconv.FormatUint(uint64(uid), 10)
	}
	return apierrors.NewForbidden(schema.GroupResource{}, "",
		fmt.Errorf("%s may not use podsapi's Kubernetes API socket (see podsapi-server --allowed-uids and --allowed-gids)", who))
}

// errAuthorizationUnavailable is a request whose SubjectAccessReview could
// not be answered (the API server is unreachable) and was not cached.
func errAuthorizationUnavailable() *apierrors.StatusError {
	e := apierrors.NewServiceUnavailable("podsapi cannot ask the API server whether this request is allowed now (SubjectAccessReview); try again")
	e.ErrStatus.Details = &metav1.StatusDetails{RetryAfterSeconds: retryAfterSeconds}
	return e
}

// errNoAuth is a request for the node's pods on a door that has no way to
// verify a caller (no API server to send TokenReviews to, no client CA).
func errNoAuth() *apierrors.StatusError {
	return apierrors.NewUnauthorized("podsapi cannot verify credentials without an API server (it has no --kubeconfig and does not run in a pod): only the peers of its --kube-api-socket that --allowed-uids allows (root by default) are served")
}

// errTooManyWatches is a watch beyond the door's bound, or beyond its
// caller's share of it.
func errTooManyWatches(n int, perCaller bool) *apierrors.StatusError {
	if perCaller {
		return apierrors.NewTooManyRequests(fmt.Sprintf("podsapi serves at most %d watches of the node's pods at once to one caller, and you hold them; close one or try again", n), retryAfterSeconds)
	}
	return apierrors.NewTooManyRequests(fmt.Sprintf("podsapi serves at most %d watches of the node's pods at once; try again", n), retryAfterSeconds)
}

// errReviewThrottledStatus is a request that could not be authenticated or
// authorized now for lack of budget: its caller's reviews (TokenReviews of
// its tokens, SubjectAccessReviews of its user), or those of the unknown
// tokens of its address, are spent. The API server was not asked: the
// caller may retry (client-go does, after Retry-After).
func errReviewThrottledStatus() *apierrors.StatusError {
	return apierrors.NewTooManyRequests("podsapi has asked the API server as many reviews (TokenReviews, SubjectAccessReviews) for this caller, or for the unknown tokens of its address, as it may for now; try again", retryAfterSeconds)
}

// errNoUpstream is a request that podsapi does not answer itself and has no
// API server to pass to.
func errNoUpstream() *apierrors.StatusError {
	return apierrors.NewServiceUnavailable("podsapi answers only the node's own pods here, and has no API server to pass other requests to (start podsapi-server with --kubeconfig, or in a pod of the cluster)")
}

// errCertNotForwardable is a passed-through request whose caller
// authenticated with a client certificate only.
func errCertNotForwardable() *apierrors.StatusError {
	return apierrors.NewUnauthorized("podsapi passes requests other than the node's pods to the API server with the caller's own credentials, and cannot forward a client certificate: use a bearer token for them")
}

// errUpstreamUnreachable is a passed-through request the API server did not
// answer.
func errUpstreamUnreachable() *apierrors.StatusError {
	e := apierrors.NewServiceUnavailable("podsapi could not pass this request to the API server: it is unreachable or did not answer")
	e.ErrStatus.Details = &metav1.StatusDetails{RetryAfterSeconds: retryAfterSeconds}
	return e
}

// errTooLarge is a passed-through request whose body is larger than the
// door takes.
func errTooLarge(limit int64) *apierrors.StatusError {
	return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("the request body is larger than the %d bytes podsapi passes to the API server", limit))
}

// writeStatus writes err's Status as JSON, with its code, as the API server
// writes a Status to a client of any content type: clients decode a Status
// from JSON whatever they asked for.
func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	s := err.Status()
	s.Kind, s.APIVersion = "Status", "v1"
	body, merr := json.Marshal(&s)
	if merr != nil { // A Status always marshals.
		body = []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":500}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	if d := s.Details; d != nil && d.RetryAfterSeconds > 0 {
		h.Set("Retry-After", strconv.Itoa(int(d.RetryAfterSeconds)))
	}
	w.WriteHeader(int(s.Code))
	_, _ = w.Write(body)
}
