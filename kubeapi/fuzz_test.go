package kubeapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	} {
		f.Add(seed, "application/json")
		f.Add(seed, "application/vnd.kubernetes.protobuf;stream=watch, */*;q=0.1")
	}
	st := newStore(pod("default", "web-1", 1), pod("kube-system", "dns-1", 2))
	h := handler(st)
	f.Fuzz(func(t *testing.T, target, accept string) {
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
	})
}
