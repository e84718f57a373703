package door

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/rest"
)

// The reviews' requests and answers against a real kube-apiserver are in
// apiserver_test.go. These tests cover what a real API server cannot be
// made to do on demand: its transient failures (500, 429), an answer both
// allowed and denied, audiences, and the SubjectAccessReview built from
// each kind of attributes.

// TestAccessReviewSpec checks the SubjectAccessReview of attributes, as
// k8s.io/apiserver's webhook authorizer builds it.
func TestAccessReviewSpec(t *testing.T) {
	u := &user.DefaultInfo{Name: "agent", UID: "u-1", Groups: []string{"g1", "system:authenticated"}, Extra: map[string][]string{"scope": {"a", "b"}}}
	withSelectors := func(field, label string) authorizer.AttributesRecord {
		a := authorizer.AttributesRecord{User: u, Verb: "list", APIVersion: "v1", Resource: "pods", ResourceRequest: true, Path: "/api/v1/pods"}
		if field != "" {
			sel, err := fields.ParseSelector(field)
			if err != nil {
				t.Fatal(err)
			}
			a.FieldSelectorRequirements = sel.Requirements()
		}
		if label != "" {
			sel, err := labels.Parse(label)
			if err != nil {
				t.Fatal(err)
			}
			a.LabelSelectorRequirements, _ = sel.Requirements()
		}
		return a
	}
	userSpec := authorizationv1.SubjectAccessReviewSpec{User: "agent", UID: "u-1", Groups: []string{"g1", "system:authenticated"},
		Extra: map[string]authorizationv1.ExtraValue{"scope": {"a", "b"}}}
	for _, tc := range []struct {
		name  string
		attrs authorizer.Attributes
		want  authorizationv1.SubjectAccessReviewSpec
	}{
		{
			name:  "get of a pod",
			attrs: authorizer.AttributesRecord{User: u, Verb: "get", Namespace: "ns", APIVersion: "v1", Resource: "pods", Name: "web", ResourceRequest: true, Path: "/api/v1/namespaces/ns/pods/web"},
			want:  withResource(userSpec, authorizationv1.ResourceAttributes{Verb: "get", Namespace: "ns", Version: "v1", Resource: "pods", Name: "web"}),
		},
		{
			name:  "subresource",
			attrs: authorizer.AttributesRecord{User: u, Verb: "get", APIVersion: "v1", Resource: "nodes", Subresource: "pods", Name: "node-1", ResourceRequest: true},
			want:  withResource(userSpec, authorizationv1.ResourceAttributes{Verb: "get", Version: "v1", Resource: "nodes", Subresource: "pods", Name: "node-1"}),
		},
		{
			name:  "non-resource path",
			attrs: authorizer.AttributesRecord{User: u, Verb: "get", Path: "/api"},
			want: func() authorizationv1.SubjectAccessReviewSpec {
				s := userSpec
				s.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Verb: "get", Path: "/api"}
				return s
			}(),
		},
		{
			name:  "selectors",
			attrs: withSelectors("spec.nodeName=node-1,metadata.namespace!=kube-system", "app in (a,b),!canary,tier"),
			want: withResource(userSpec, authorizationv1.ResourceAttributes{Verb: "list", Version: "v1", Resource: "pods",
				FieldSelector: &authorizationv1.FieldSelectorAttributes{Requirements: []metav1.FieldSelectorRequirement{
					{Key: "metadata.namespace", Operator: metav1.FieldSelectorOpNotIn, Values: []string{"kube-system"}},
					{Key: "spec.nodeName", Operator: metav1.FieldSelectorOpIn, Values: []string{"node-1"}},
				}},
				LabelSelector: &authorizationv1.LabelSelectorAttributes{Requirements: []metav1.LabelSelectorRequirement{
					{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}},
					{Key: "canary", Operator: metav1.LabelSelectorOpDoesNotExist},
					{Key: "tier", Operator: metav1.LabelSelectorOpExists},
				}},
			}),
		},
		{
			// A requirement a review cannot carry is left out: the access
			// asked is broader, never narrower.
			name:  "label operators a review cannot carry",
			attrs: withSelectors("", "replicas>1,app=web"),
			want: withResource(userSpec, authorizationv1.ResourceAttributes{Verb: "list", Version: "v1", Resource: "pods",
				LabelSelector: &authorizationv1.LabelSelectorAttributes{Requirements: []metav1.LabelSelectorRequirement{
					{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}},
				}},
			}),
		},
		{
			name:  "only operators a review cannot carry",
			attrs: withSelectors("", "replicas>1"),
			want:  withResource(userSpec, authorizationv1.ResourceAttributes{Verb: "list", Version: "v1", Resource: "pods"}),
		},
		{
			name:  "no user",
			attrs: authorizer.AttributesRecord{Verb: "get", Path: "/version"},
			want:  authorizationv1.SubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{Verb: "get", Path: "/version"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := json.Marshal(accessReviewSpec(tc.attrs))
			want, _ := json.Marshal(tc.want)
			if string(got) != string(want) {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}

func withResource(s authorizationv1.SubjectAccessReviewSpec, ra authorizationv1.ResourceAttributes) authorizationv1.SubjectAccessReviewSpec {
	s.ResourceAttributes = &ra
	return s
}

// reviewer is a loopback HTTP server that answers the reviews posted to
// it with the answers of a test, in turn, and counts the requests.
type reviewer struct {
	mu       sync.Mutex
	answers  []func(w http.ResponseWriter, body []byte)
	requests []string
}

func (v *reviewer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	v.mu.Lock()
	v.requests = append(v.requests, r.Method+" "+r.URL.Path)
	if len(v.answers) == 0 {
		v.mu.Unlock()
		http.Error(w, "no answer left", http.StatusTeapot)
		return
	}
	answer := v.answers[0]
	v.answers = v.answers[1:]
	v.mu.Unlock()
	answer(w, body)
}

func (v *reviewer) count() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.requests)
}

// status answers an API server's Status error.
func status(err *apierrors.StatusError, retryAfter string) func(http.ResponseWriter, []byte) {
	return func(w http.ResponseWriter, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		st := err.Status()
		st.Kind, st.APIVersion = "Status", "v1"
		w.WriteHeader(int(st.Code))
		_ = json.NewEncoder(w).Encode(st)
	}
}

// answer answers the review posted, its status set by fill.
func answer[T any](fill func(*T)) func(http.ResponseWriter, []byte) {
	return func(w http.ResponseWriter, body []byte) {
		var review T
		if err := json.Unmarshal(body, &review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fill(&review)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(&review)
	}
}

// newReviewer serves v and returns the review clients of it.
func newReviewer(t *testing.T, v *reviewer) *reviewClients {
	t.Helper()
	s := httptest.NewServer(v)
	t.Cleanup(s.Close)
	c, err := newReviewClients(&rest.Config{Host: s.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// decide answers a SubjectAccessReview with a decision, "because".
func decide(allowed, denied bool) func(http.ResponseWriter, []byte) {
	return answer(func(r *authorizationv1.SubjectAccessReview) {
		r.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: allowed, Denied: denied, Reason: "because"}
	})
}

// fastBackoff retries as reviewBackoff does, without its delays.
var fastBackoff = wait.Backoff{Duration: time.Microsecond, Factor: 1, Steps: 5}

var internal = apierrors.NewInternalError(errors.New("etcd is slow"))

func TestTokenReviews(t *testing.T) {
	authenticated := answer(func(r *authenticationv1.TokenReview) {
		if r.Spec.Token != "tok" {
			r.Status.Error = "unknown token"
			return
		}
		r.Status = authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: r.Spec.Audiences,
			User: authenticationv1.UserInfo{Username: "agent", UID: "u-1", Groups: []string{"g1"}, Extra: map[string]authenticationv1.ExtraValue{"scope": {"x"}}}}
	})
	for _, tc := range []struct {
		name      string
		answers   []func(http.ResponseWriter, []byte)
		token     string
		audiences authenticator.Audiences
		wantUser  string
		wantAuds  authenticator.Audiences
		wantErr   error
		requests  int
	}{
		{name: "authenticated", answers: []func(http.ResponseWriter, []byte){authenticated}, token: "tok", wantUser: "agent", requests: 1},
		{name: "rejected with the API server's reason", answers: []func(http.ResponseWriter, []byte){authenticated}, token: "bad", wantErr: errors.New("unknown token"), requests: 1},
		{name: "500 and 429 retried", answers: []func(http.ResponseWriter, []byte){status(internal, ""), status(apierrors.NewTooManyRequests("slow down", 0), "0"), authenticated},
			token: "tok", wantUser: "agent", requests: 3},
		{name: "retries spent", answers: slices.Repeat([]func(http.ResponseWriter, []byte){status(internal, "")}, 5), token: "tok", wantErr: errReview, requests: 5},
		{name: "403 not retried", answers: []func(http.ResponseWriter, []byte){status(apierrors.NewForbidden(schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"}, "", errors.New("no")), "")},
			token: "tok", wantErr: errReview, requests: 1},
		{name: "audience asked and granted", answers: []func(http.ResponseWriter, []byte){authenticated}, token: "tok", audiences: authenticator.Audiences{"podsapi"},
			wantUser: "agent", wantAuds: authenticator.Audiences{"podsapi"}, requests: 1},
		{name: "audience asked, none granted", answers: []func(http.ResponseWriter, []byte){answer(func(r *authenticationv1.TokenReview) {
			r.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "agent"}}
		})}, token: "tok", audiences: authenticator.Audiences{"podsapi"}, requests: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &reviewer{answers: tc.answers}
			tr := &tokenReviews{client: newReviewer(t, v).authentication, backoff: fastBackoff, timeout: time.Minute}
			ctx := t.Context()
			if tc.audiences != nil {
				ctx = authenticator.WithAudiences(ctx, tc.audiences)
			}
			resp, ok, err := tr.AuthenticateToken(ctx, tc.token)
			switch {
			case tc.wantErr == errReview && !errors.Is(err, errReview):
				t.Fatalf("err %v, want a failed review", err)
			case tc.wantErr != nil && tc.wantErr != errReview && (err == nil || err.Error() != tc.wantErr.Error()):
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			case tc.wantErr == nil && err != nil:
				t.Fatal(err)
			}
			if got := ""; ok {
				got = resp.User.GetName()
				if got != tc.wantUser || !slices.Equal(resp.Audiences, tc.wantAuds) {
					t.Errorf("user %q audiences %v, want %q %v", got, resp.Audiences, tc.wantUser, tc.wantAuds)
				}
				if resp.User.GetUID() != "u-1" || !slices.Equal(resp.User.GetGroups(), []string{"g1"}) || !slices.Equal(resp.User.GetExtra()["scope"], []string{"x"}) {
					t.Errorf("user %+v", resp.User)
				}
			} else if tc.wantUser != "" {
				t.Errorf("not authenticated, want %q", tc.wantUser)
			}
			if n := v.count(); n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
		})
	}
}

func TestAccessReviews(t *testing.T) {
	pods := authorizer.AttributesRecord{User: &user.DefaultInfo{Name: "agent"}, Verb: "list", APIVersion: "v1", Resource: "pods", ResourceRequest: true}
	for _, tc := range []struct {
		name     string
		answers  []func(http.ResponseWriter, []byte)
		attrs    authorizer.AttributesRecord
		want     authorizer.Decision
		wantErr  bool
		requests int // after asking twice
	}{
		{name: "allowed, cached", answers: []func(http.ResponseWriter, []byte){decide(true, false)}, attrs: pods, want: authorizer.DecisionAllow, requests: 1},
		{name: "denied, cached", answers: []func(http.ResponseWriter, []byte){decide(false, true)}, attrs: pods, want: authorizer.DecisionDeny, requests: 1},
		{name: "no opinion, cached", answers: []func(http.ResponseWriter, []byte){decide(false, false)}, attrs: pods, want: authorizer.DecisionNoOpinion, requests: 1},
		{name: "both allowed and denied", answers: []func(http.ResponseWriter, []byte){decide(true, true)}, attrs: pods, want: authorizer.DecisionDeny, wantErr: true, requests: 1},
		{name: "500 retried", answers: []func(http.ResponseWriter, []byte){status(internal, ""), decide(true, false)}, attrs: pods, want: authorizer.DecisionAllow, requests: 2},
		{name: "failure not cached", answers: []func(http.ResponseWriter, []byte){
			status(apierrors.NewForbidden(schema.GroupResource{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}, "", errors.New("no")), ""),
			status(apierrors.NewForbidden(schema.GroupResource{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}, "", errors.New("no")), ""),
		}, attrs: pods, want: authorizer.DecisionNoOpinion, wantErr: true, requests: 2},
		{name: "attributes too long to cache", answers: []func(http.ResponseWriter, []byte){decide(true, false), decide(true, false)},
			attrs: func() authorizer.AttributesRecord {
				a := pods
				a.Name = string(make([]byte, maxCachedAttrs))
				return a
			}(), want: authorizer.DecisionAllow, requests: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &reviewer{answers: tc.answers}
			a := newAccessReviews(newReviewer(t, v).authorization, fastBackoff, time.Minute, time.Hour, time.Hour, nil)
			for range 2 {
				d, reason, err := a.Authorize(context.Background(), tc.attrs)
				if d != tc.want || (err != nil) != tc.wantErr {
					t.Fatalf("%v %q %v, want %v (error %v)", d, reason, err, tc.want, tc.wantErr)
				}
				if err == nil && reason != "because" {
					t.Errorf("reason %q", reason)
				}
			}
			if n := v.count(); n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
		})
	}
}

// TestAuthReviewFailureKnown checks that a TokenReview the API server did
// not answer reaches the door, through the token cache and the union of
// authenticators, as a failed review (which the door warns of), and a
// token the API server rejects does not.
func TestAuthReviewFailureKnown(t *testing.T) {
	forbidden := status(apierrors.NewForbidden(schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"}, "", errors.New("no")), "")
	rejected := answer(func(r *authenticationv1.TokenReview) { r.Status.Error = "token expired" })
	for _, tc := range []struct {
		name   string
		answer func(http.ResponseWriter, []byte)
		failed bool
	}{
		{"review failed", forbidden, true},
		{"token rejected", rejected, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := httptest.NewServer(&reviewer{answers: []func(http.ResponseWriter, []byte){tc.answer}})
			t.Cleanup(s.Close)
			a, err := NewAuth(&rest.Config{Host: s.URL})
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest(http.MethodGet, "/api/v1/pods", nil)
			r.Header.Set("Authorization", "Bearer some-token")
			_, ok, err := a.authenticator.AuthenticateRequest(r)
			if ok || err == nil {
				t.Fatalf("authenticated %v, error %v", ok, err)
			}
			if errors.Is(err, errReview) != tc.failed {
				t.Errorf("error %v: a failed review %v, want %v", err, errors.Is(err, errReview), tc.failed)
			}
		})
	}
}
