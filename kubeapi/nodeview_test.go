package kubeapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/podsapi/podsapi/kindstore"
	"github.com/podsapi/podsapi/kubeapi"
)

// TestNodeViewBeforeSync checks that the node view claims the requests of
// a kind whose store has not synced yet and answers them 503 with
// Retry-After, as it answers pods, rather than leaving them to the API
// server, whose answers would be the cluster's; the full view leaves them
// to the API server.
func TestNodeViewBeforeSync(t *testing.T) {
	rs := kindstore.NewReplicaSets()
	st := newStore()
	full := handler(st, kubeapi.WithResource(replicaSetsGVR, rs))
	view := handler(st, kubeapi.WithResource(replicaSetsGVR, rs), kubeapi.WithNodeView())
	for _, target := range []string{"/apis/apps/v1/replicasets", "/apis/apps/v1/namespaces/a/replicasets?watch=1", "/apis/apps/v1/namespaces/a/replicasets/web-1"} {
		t.Run(target, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, target, nil)
			if _, ok := full.Local(r); ok {
				t.Error("full view: local before the store synced")
			}
			if _, ok := view.Local(r); !ok {
				t.Fatal("node view: not local before the store synced")
			}
			w := httptest.NewRecorder()
			view.ServeHTTP(w, r)
			if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), `"reason":"ServiceUnavailable"`) {
				t.Errorf("node view: %d Retry-After %q %s, want 503 with Retry-After", w.Code, w.Header().Get("Retry-After"), w.Body)
			}
		})
	}
	rs.MarkSynced()
	if _, ok := full.Local(httptest.NewRequest(http.MethodGet, "/apis/apps/v1/replicasets", nil)); !ok {
		t.Error("full view: not local once the store synced")
	}
}
