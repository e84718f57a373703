package kubeapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/store"
)

// get sends a GET of target to the server with accept as its Accept header
// and returns the response and its body.
func (s *served) get(t *testing.T, target, accept string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.srv.URL+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// TestErrors sends requests the API server refuses and checks the handler
// answers the API server's Status: its code, reason and message.
func TestErrors(t *testing.T) {
	const list = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1"
	synced := newStore(pod("default", "web-1", 1))
	tests := []struct {
		name, target, accept string
		st                   *store.Store
		code                 int
		reason               metav1.StatusReason
		message              string
		retryAfter           string
	}{
		{name: "bad label selector", target: list + "&labelSelector=a+in+(", code: 400, reason: metav1.StatusReasonBadRequest, message: "unable to parse requirement"},
		{name: "unsupported field label", target: list + ",spec.foo%3Dx", code: 400, reason: metav1.StatusReasonBadRequest, message: "field label not supported: spec.foo"},
		{name: "unknown pod", target: "/api/v1/namespaces/default/pods/web-2", code: 404, reason: metav1.StatusReasonNotFound, message: `pods "web-2" not found`},
		{name: "not synced", target: list, st: store.New(), code: 503, reason: metav1.StatusReasonServiceUnavailable, message: "not yet read", retryAfter: "1"},
		{name: "not synced, kubelet's /pods", target: "/pods", st: store.New(), code: 503, reason: metav1.StatusReasonServiceUnavailable, retryAfter: "1"},
		{name: "exact match of a past revision", target: list + "&resourceVersion=" + synced.Revision(0) + "&resourceVersionMatch=Exact", code: 410, reason: metav1.StatusReasonExpired, message: "too old resource version"},
		{name: "bad resourceVersionMatch", target: list + "&resourceVersion=1&resourceVersionMatch=Newest", code: 422, reason: metav1.StatusReasonInvalid, message: "resourceVersionMatch"},
		{name: "resourceVersionMatch without resourceVersion", target: list + "&resourceVersionMatch=Exact", code: 422, reason: metav1.StatusReasonInvalid, message: "resourceVersionMatch is forbidden unless resourceVersion is provided"},
		{name: "sendInitialEvents on a list", target: list + "&sendInitialEvents=true", code: 422, reason: metav1.StatusReasonInvalid, message: "sendInitialEvents is forbidden for list"},
		{name: "bad continue", target: list + "&limit=1&continue=%25%25", code: 400, reason: metav1.StatusReasonBadRequest, message: "continue key is not valid"},
		{name: "not acceptable", target: list, accept: "application/yaml", code: 406, reason: metav1.StatusReasonNotAcceptable},
		{name: "not pinned to the node", target: "/api/v1/pods", code: 503, reason: metav1.StatusReasonServiceUnavailable, message: "only the pods of node"},
		{name: "a path not served", target: "/api/v1/namespaces", code: 404, reason: metav1.StatusReasonNotFound, message: "could not find the requested resource"},
		{name: "discovery not asked for", target: "/api", code: 404, reason: metav1.StatusReasonNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := tt.st
			if st == nil {
				st = synced
			}
			resp, body := serve(t, handler(st)).get(t, tt.target, tt.accept)
			var status metav1.Status
			if err := json.Unmarshal(body, &status); err != nil {
				t.Fatalf("body %q: %v", body, err)
			}
			if resp.StatusCode != tt.code || status.Code != int32(tt.code) || status.Reason != tt.reason || status.Kind != "Status" || status.Status != metav1.StatusFailure {
				t.Fatalf("got %d %+v, want %d %s", resp.StatusCode, status, tt.code, tt.reason)
			}
			if !strings.Contains(status.Message, tt.message) {
				t.Errorf("message %q, want it to hold %q", status.Message, tt.message)
			}
			if got := resp.Header.Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tt.retryAfter)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
}

// TestErrorsThroughClientGo checks a typed clientset reads the handler's
// errors in each encoding as the API server's.
func TestErrorsThroughClientGo(t *testing.T) {
	for _, ct := range contentTypes {
		t.Run(ct.name, func(t *testing.T) {
			cs := serve(t, handler(newStore(pod("default", "web-1", 1)))).clientset(t, ct.contentType)
			ctx := context.Background()
			_, err := cs.CoreV1().Pods("default").Get(ctx, "web-2", metav1.GetOptions{})
			if !apierrors.IsNotFound(err) || err.Error() != `pods "web-2" not found` {
				t.Errorf("get of an unknown pod: %v", err)
			}
			_, err = cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: pinned, LabelSelector: "a in ("})
			if !apierrors.IsBadRequest(err) {
				t.Errorf("bad label selector: %v", err)
			}
			_, err = cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: pinned + ",spec.foo=x"})
			if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "field label not supported: spec.foo") {
				t.Errorf("unsupported field label: %v", err)
			}
			got, err := cs.CoreV1().Pods("default").Get(ctx, "web-1", metav1.GetOptions{})
			if err != nil || got.Name != "web-1" || got.UID != pod("default", "web-1", 1).UID {
				t.Errorf("get: %v %v", got, err)
			}
		})
	}
}
