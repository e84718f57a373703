package door_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/podsapi/podsapi/guard"
	"github.com/podsapi/podsapi/kubeapi/door"
)

// viewDouble is a localDouble that says which view answered (header
// X-View).
type viewDouble struct {
	*localDouble
	name string
}

func (v viewDouble) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-View", v.name+" "+r.URL.Path)
	v.localDouble.ServeHTTP(w, r)
}

// TestNodeViewRoutes sends requests to a door with a node view (as a
// socket peer, which needs no credentials) and an upstream that says what
// it was asked: a request under /views/node is the node view's, stripped
// of the path, answered by its Local side when it claims it and passed
// through stripped otherwise; any other path is the full view's, unchanged.
func TestNodeViewRoutes(t *testing.T) {
	upstream := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Upstream", r.URL.EscapedPath())
		w.WriteHeader(http.StatusNotFound)
	}))
	defer upstream.Close()
	pass, err := door.NewPassThrough(&rest.Config{Host: upstream.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	self := uint32(os.Geteuid())
	d := door.New(viewDouble{newLocalDouble(), "full"}, door.WithPeerPolicy(&guard.AccessPolicy{UIDs: []uint32{self}}),
		door.WithPassThrough(pass), door.WithNodeView(viewDouble{newLocalDouble(), "node"}))
	s := serve(t, d, door.Config{Socket: filepath.Join(t.TempDir(), "kube.sock")})
	for _, c := range []struct {
		name, path   string
		view, passed string // X-View, X-Upstream
	}{
		{"node view, local", "/views/node/api/v1/namespaces/a/pods", "node /api/v1/namespaces/a/pods", ""},
		{"full view, local", "/api/v1/namespaces/a/pods", "full /api/v1/namespaces/a/pods", ""},
		{"node view, passed through", "/views/node/api/v1/namespaces", "", "/api/v1/namespaces"},
		{"node view, discovery", "/views/node/apis", "", "/apis"},
		{"the view's root", "/views/node", "", "/"},
		{"the view's root, slash", "/views/node/", "", "/"},
		{"not the view", "/views/nodes/api/v1/namespaces/a/pods", "", "/views/nodes/api/v1/namespaces/a/pods"},
		{"full view, passed through", "/api/v1/namespaces", "", "/api/v1/namespaces"},
		{"escaped, under the view", "/views/node/api/v1/namespaces/a%2Fb/pods", "", "/api/v1/namespaces/a%2Fb/pods"},
		{"escaped view path", "/views%2Fnode/api/v1/namespaces/a/pods", "", "/views%2Fnode/api/v1/namespaces/a/pods"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := get(t, s.socketClient(), "http://podsapi"+c.path, "")
			if got := a.header.Get("X-View"); got != c.view {
				t.Errorf("answered by %q, want %q (%d %s)", got, c.view, a.code, a.body)
			}
			if got := a.header.Get("X-Upstream"); got != c.passed {
				t.Errorf("passed through as %q, want %q", got, c.passed)
			}
		})
	}
}
