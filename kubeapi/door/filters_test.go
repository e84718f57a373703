package door

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/podsapi/podsapi/internal/admit"
	"github.com/podsapi/podsapi/kubeapi"
)

// TestWatches: which passed-through requests are watches.
func TestWatches(t *testing.T) {
	tests := []struct {
		name, method, url string
		want              bool
	}{
		{"WatchTrue", "GET", "/api/v1/namespaces?watch=true", true},
		{"WatchOne", "GET", "/apis/apps/v1/deployments?watch=1", true},
		{"WatchFalse", "GET", "/api/v1/namespaces?watch=false", false},
		{"WatchFALSE", "GET", "/api/v1/namespaces?watch=FALSE", false},
		{"WatchZero", "GET", "/api/v1/namespaces?watch=0", false},
		{"WatchYes", "GET", "/api/v1/namespaces?watch=yes", true},
		{"WatchTitle", "GET", "/api/v1/namespaces?watch=True", true},
		{"WatchEmpty", "GET", "/api/v1/namespaces?watch=", true},
		{"LegacyCore", "GET", "/api/v1/watch/namespaces", true},
		{"LegacyGroup", "GET", "/apis/apps/v1/watch/namespaces/a/deployments", true},
		{"List", "GET", "/api/v1/namespaces", false},
		{"NamedWatch", "GET", "/api/v1/namespaces/watch", false},
		{"Post", "POST", "/api/v1/namespaces?watch=true", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := watches(httptest.NewRequest(tt.method, tt.url, nil)); got != tt.want {
				t.Fatalf("watches(%s %s) = %v, want %v", tt.method, tt.url, got, tt.want)
			}
		})
	}
}

// decisions is an authorizer that allows what allow says, recording the
// attributes asked.
type decisions struct {
	allow func(authorizer.Attributes) bool
	asked []authorizer.Attributes
}

func (d *decisions) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	d.asked = append(d.asked, a)
	if d.allow(a) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// TestAuthorizeWithoutSelectorsFirst: an access is asked without its
// selectors first, so that a caller allowed it broadly gets one decision
// whatever its selectors, and with them only when it is not (the Node
// authorizer's spec.nodeName).
func TestAuthorizeWithoutSelectorsFirst(t *testing.T) {
	broad := func(a authorizer.Attributes) bool { return true }
	byNode := func(a authorizer.Attributes) bool {
		reqs, _ := a.GetFieldSelector()
		return slices.ContainsFunc(reqs, func(r fields.Requirement) bool { return r.Field == "spec.nodeName" && r.Value == "node-1" })
	}
	tests := []struct {
		name      string
		allow     func(authorizer.Attributes) bool
		access    kubeapi.Access
		want      authorizer.Decision
		wantAsked int
	}{
		{"BroadRights", broad, kubeapi.Access{Verb: "list", Resource: "pods", LabelSelector: "app=x"}, authorizer.DecisionAllow, 1},
		{"NodeRights", byNode, kubeapi.Access{Verb: "list", Resource: "pods", FieldSelector: "spec.nodeName=node-1"}, authorizer.DecisionAllow, 2},
		{"NodeRightsOtherNode", byNode, kubeapi.Access{Verb: "list", Resource: "pods", FieldSelector: "spec.nodeName=node-2"}, authorizer.DecisionNoOpinion, 2},
		{"NoSelectorsAskedOnce", byNode, kubeapi.Access{Verb: "list", Resource: "pods"}, authorizer.DecisionNoOpinion, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			authz := &decisions{allow: tt.allow}
			d := New(nil, WithAuth(&Auth{authorizer: authz}))
			got, _, err := d.authorize(t.Context(), &user.DefaultInfo{Name: "u"}, tt.access, "/api/v1/pods")
			if err != nil || got != tt.want || len(authz.asked) != tt.wantAsked {
				t.Fatalf("authorize = %v, %v after %d decisions, want %v after %d", got, err, len(authz.asked), tt.want, tt.wantAsked)
			}
			if reqs, _ := authz.asked[0].GetFieldSelector(); len(reqs) > 0 {
				t.Fatalf("first decision asked with selectors %v", reqs)
			}
		})
	}
}

// TestSelectorsCachedOnce: the requirements a review carries are sorted
// and without repeats, so that reordering them does not make a new review.
func TestSelectorsCachedOnce(t *testing.T) {
	spec := func(field, label string) string {
		attrs := authorizer.AttributesRecord{User: &user.DefaultInfo{Name: "u"}, Verb: "list", Resource: "pods", ResourceRequest: true}
		selectors(&attrs, kubeapi.Access{FieldSelector: field, LabelSelector: label})
		s := accessReviewSpec(attrs)
		return s.ResourceAttributes.FieldSelector.String() + s.ResourceAttributes.LabelSelector.String()
	}
	a := spec("spec.nodeName=n,metadata.namespace=a", "b in (2,1),a=1")
	for _, same := range [][2]string{
		{"metadata.namespace=a,spec.nodeName=n", "a=1,b in (1,2)"},
		{"metadata.namespace=a,spec.nodeName=n,spec.nodeName=n", "a=1,b in (1,2,2),a=1"},
	} {
		if b := spec(same[0], same[1]); b != a {
			t.Fatalf("selectors %q, %q reviewed as\n%s\nwant as %q, %q\n%s", same[0], same[1], b, "spec.nodeName=n,metadata.namespace=a", "b in (2,1),a=1", a)
		}
	}
}

// TestWatchSlotsCountPassedThrough: passed-through watches hold slots of
// the door's watches in their caller's name, as local ones do, so that one
// caller's cannot refuse another's; the callers the door does not know (a
// token neither seen authenticated nor signed, or none) are named by their
// address, so that a new garbage token is not a new caller with a share of
// its own; other requests hold none.
func TestWatchSlotsCountPassedThrough(t *testing.T) {
	d := New(nil, WithMaxWatches(4, 1000))
	held := make(chan struct{})
	release := make(chan struct{})
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		held <- struct{}{}
		<-release
	})
	chain := d.withPassedCaller(d.withWatchSlots(next))
	serve := func(url, token, source string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", url, nil)
		r.RemoteAddr = source + ":40000"
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		info := &doorRequest{watch: watches(r)}
		w := httptest.NewRecorder()
		chain.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), infoKey{}, info)))
		return w
	}
	done := make(chan *httptest.ResponseRecorder, 8)
	for _, token := range []string{"garbage-1", "garbage-2"} { // Its share: half the total.
		go func() { done <- serve("/api/v1/namespaces?watch=true", token, "10.0.0.1") }()
		<-held
	}
	for _, token := range []string{"garbage-3", "garbage-1", ""} {
		refused := make(chan *httptest.ResponseRecorder, 1)
		go func() { refused <- serve("/api/v1/namespaces?watch=true", token, "10.0.0.1") }()
		select {
		case <-held:
			t.Fatalf("a watch beyond the share of its address, token %q: served", token)
		case w := <-refused:
			if w.Code != http.StatusTooManyRequests {
				t.Fatalf("a watch beyond the share of its address, token %q: %d, want 429", token, w.Code)
			}
			// A watch of namespaces: the refusal names the watches it
			// counts among, not the node's pods alone.
			if !strings.Contains(w.Body.String(), "watches through its Kubernetes API") {
				t.Fatalf("the refusal of a watch of namespaces says %s", w.Body)
			}
		}
	}
	go func() { done <- serve("/api/v1/namespaces", "garbage-4", "10.0.0.1") }() // Not a watch.
	<-held
	go func() { done <- serve("/api/v1/namespaces?watch=true", "garbage-5", "10.0.0.2") }()
	<-held
	if n := d.watches.Held(); n != 3 {
		t.Fatalf("%d watch slots held, want 3", n)
	}
	close(release)
	for range 4 {
		if w := <-done; w.Code != http.StatusOK {
			t.Fatalf("a watch within the shares: %d", w.Code)
		}
	}
	if n := d.watches.Held(); n != 0 {
		t.Fatalf("%d watch slots held after the watches ended, want 0", n)
	}
}

// TestReviewBudget: which tokens are reviewed, within which budget.
func TestReviewBudget(t *testing.T) {
	is := newIssuer(t)
	now := time.Now()
	signed := func(sub string) string {
		return sign(t, is.key, is.kid, jwtClaims(sub, now.Add(time.Hour)))
	}
	forged := sign(t, mustKey(t), is.kid, jwtClaims("system:serviceaccount:a:x", now.Add(time.Hour)))
	b := newReviewBudget(time.Minute, is.keys, ReviewBudgets{PerAddress: DefaultReviewQPSPerAddress})
	b.perUser = admit.NewKeyedLimiter(1e-9, 2)
	verdicts := func(source, token string, n int) map[tokenVerdict]int {
		out := map[tokenVerdict]int{}
		for range n {
			v, _ := b.admit(t.Context(), source, token)
			out[v]++
		}
		return out
	}
	if got := verdicts("10.0.0.1", forged, 50); got[tokenRefused] != 50 {
		t.Fatalf("forged tokens: %v, want all refused without a review", got)
	}
	// Opaque garbage spends its address's budget, and only that.
	for i := range 50 {
		b.admit(t.Context(), "10.0.0.1", "garbage-"+string(rune('a'+i)))
	}
	if got := verdicts("10.0.0.1", "static-token", 1); got[tokenThrottled] != 1 {
		t.Fatalf("a new opaque token from the flooded address: %v, want throttled", got)
	}
	if got := verdicts("10.0.0.2", "static-token", 1); got[tokenReviewed] != 1 {
		t.Fatalf("a new opaque token from another address: %v, want reviewed", got)
	}
	// Signed tokens from the flooded address are reviewed within their
	// subject's budget.
	if got := verdicts("10.0.0.1", signed("system:serviceaccount:a:agent"), 3); got[tokenReviewed] != 2 || got[tokenThrottled] != 1 {
		t.Fatalf("a signed token from the flooded address: %v, want its subject's 2 reviews, then throttled", got)
	}
	if got := verdicts("10.0.0.1", signed("system:serviceaccount:a:other"), 1); got[tokenReviewed] != 1 {
		t.Fatalf("another subject's token: %v, want reviewed", got)
	}
	// A token seen authenticated needs no budget, and names its user.
	b.authenticated("static-token", "alice")
	if v, user := b.admit(t.Context(), "10.0.0.1", "static-token"); v != tokenKnown || user != "alice" {
		t.Fatalf("a token seen authenticated: %v %q, want known as alice", v, user)
	}
	if user := b.callerOf(t.Context(), signed("system:serviceaccount:a:third")); user != "system:serviceaccount:a:third" {
		t.Fatalf("the caller of a signed token: %q, want its subject", user)
	}
}

// A WebSocket subprotocol's token is read only from a request without an
// Authorization header, so that the token a review is sent for is always
// the one the review budget was charged for (bearerToken).
func TestWebSocketTokenOnlyWithoutAuthorization(t *testing.T) {
	const wsToken = "base64url.bearer.authorization.k8s.io.Z2FyYmFnZQ"
	for _, tc := range []struct {
		name          string
		authorization string
		consulted     bool
	}{
		{name: "no Authorization", consulted: true},
		{name: "another scheme", authorization: "Basic eDp5"},
		{name: "a bearer token", authorization: "Bearer abc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			consulted := false
			a := withoutAuthorization(authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) {
				consulted = true
				return nil, false, nil
			}))
			r := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/a/pods/p/exec", nil)
			r.Header.Set("Connection", "Upgrade")
			r.Header.Set("Upgrade", "websocket")
			r.Header.Set("Sec-WebSocket-Protocol", wsToken)
			if tc.authorization != "" {
				r.Header.Set("Authorization", tc.authorization)
			}
			if _, _, err := a.AuthenticateRequest(r); err != nil {
				t.Fatal(err)
			}
			if consulted != tc.consulted {
				t.Errorf("the WebSocket authenticator consulted: %v, want %v", consulted, tc.consulted)
			}
			if want := map[bool]string{true: wsToken, false: ""}[tc.consulted]; tc.authorization != "Bearer abc" && bearerToken(r) != want {
				t.Errorf("bearerToken = %q, want %q: the budget must be charged for the token reviewed", bearerToken(r), want)
			}
		})
	}
}
