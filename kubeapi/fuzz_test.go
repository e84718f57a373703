package kubeapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/kubeapi"
)

// FuzzServeHTTP sends the handler arbitrary targets and Accept headers: it
// never panics, Local never panics either, and every answer but a 200 is a
// metav1.Status in JSON with the status code it carries.
func FuzzServeHTTP(f *testing.F) {
	for _, seed := range []string{
		"/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1",
		"/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1&watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan",
		"/api/v1/namespaces/default/pods?fieldSelector=spec.nodeName%3Dnode-1&limit=1&continue=eyJydiI6IngifQ",
		"/api/v1/namespaces/default/pods/web-1",
		"/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1&labelSelector=a+in+(&resourceVersion=x",
		"/pods", "/api", "/version",
		"/apis/apps/v1/namespaces/default/replicasets/web-1",
		"/apis/batch/v1/jobs?fieldSelector=status.successful%3D1&watch=1&sendInitialEvents=true&allowWatchBookmarks=true",
		"/apis/apps/v1/daemonsets?labelSelector=app&fieldSelector=spec.x%3D1",
		"/api/v1/nodes?watch=true",
	} {
		f.Add(seed, "application/json")
		f.Add(seed, "application/vnd.kubernetes.protobuf;stream=watch, */*;q=0.1")
	}
	st := newStore(pod("default", "web-1", 1), pod("kube-system", "dns-1", 2))
	// The full view of the pods, and the node view of the pods and of the
	// owner kinds.
	hs := []*kubeapi.Handler{handler(st), handler(st, append(ownerStores().opts, kubeapi.WithNodeView())...)}
	f.Fuzz(func(t *testing.T, target, accept string) {
		for _, h := range hs {
			serveFuzzed(t, h, target, accept)
		}
	})
}

// serveFuzzed sends h a GET of target with the Accept header accept, and
// checks its answer is a 200 or a Status.
func serveFuzzed(t *testing.T, h *kubeapi.Handler, target, accept string) {
	t.Helper()
	if !strings.HasPrefix(target, "/") {
		target = "/" + target
	}
	req, err := http.NewRequest(http.MethodGet, "http://node"+target, nil)
	if err != nil {
		return
	}
	req.Header.Set("Accept", accept)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a watch ends after its first events
	req = req.WithContext(ctx)
	h.Local(req)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code == http.StatusOK {
		return
	}
	var status metav1.Status
	if err := json.Unmarshal(w.Body.Bytes(), &status); err != nil && w.Header().Get("Content-Type") == "application/json" {
		t.Fatalf("%s: %d with a body that is not a Status: %q", target, w.Code, w.Body.Bytes())
	}
	if w.Header().Get("Content-Type") == "application/json" && (status.Kind != "Status" || int(status.Code) != w.Code) {
		t.Fatalf("%s: %d with %+v", target, w.Code, status)
	}
}
