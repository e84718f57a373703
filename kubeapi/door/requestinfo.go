package door

import (
	"context"
	"net/http"
	"strings"

	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/podsapi/podsapi/kubeapi"
)

// doorRequest is what the door's filters learn of a request, carried in
// its context from the outermost filter in (as k8s.io/apiserver's
// RequestInfo and user): the route chosen, the accesses it needs, whether
// it watches, and its caller once a filter has named it.
type doorRequest struct {
	// route is the metrics' route: routeLocal when the Local side claims
	// the request, else routeProxied.
	route string
	// local sends the request to the local chain: the Local side claims
	// it, or, on a door without an API server, it reads pods.
	local bool
	// accesses are those the request needs, any one of them enough.
	accesses []kubeapi.Access
	// view is the Local side of the request's view: the full view's, or
	// the node view's for a request under NodeViewPath.
	view Local
	// watch is true for a watch, local or passed through.
	watch bool
	// caller names who holds the request's watch slot; user is the
	// authenticated user of a local request (nil for a socket peer).
	caller string
	user   user.Info
}

type infoKey struct{}

// infoFrom returns the doorRequest of ctx; a zero one outside the chain.
func infoFrom(ctx context.Context) *doorRequest {
	if info, ok := ctx.Value(infoKey{}).(*doorRequest); ok {
		return info
	}
	return &doorRequest{}
}

// withRequestInfo learns what a request is before any other filter runs:
// its view (the node view's for a path under NodeViewPath, which is
// stripped from the request every later filter and the pass-through see;
// else the full view's), whether the view's Local side claims it (never when it asks for impersonation,
// which is the API server's to check and apply), the accesses it needs,
// and whether it watches. On a door without an API server, a read of pods
// that the Local side does not claim (a pod the node does not hold, a list
// not pinned to the node) goes to the local chain too, to be authorized
// and answered by it (404; 503 naming the field selector to add).
func (d *Door) withRequestInfo(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := &doorRequest{route: routeProxied}
		info.view, r = d.viewOf(r)
		accesses, local := info.view.Local(r)
		if local && !impersonates(r) {
			info.route, info.local, info.accesses = routeLocal, true, accesses
		} else if d.pass == nil && !impersonates(r) {
			info.accesses, info.local = info.view.Pods(r)
		}
		if info.local {
			info.watch = len(info.accesses) > 0 && info.accesses[0].Verb == "watch"
		} else {
			info.watch = watches(r)
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), infoKey{}, info)))
	})
}

// watches reports whether r asks the API server for a watch: with a watch
// parameter the API server reads as true (any value but "0" and "false",
// kubeapi.IsTrue), or on a legacy /watch/ path.
func watches(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	if kubeapi.IsTrue(r.URL.Query(), "watch") {
		return true
	}
	p := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(p) > 2 && p[0] == "api":
		return p[2] == "watch"
	case len(p) > 3 && p[0] == "apis":
		return p[3] == "watch"
	}
	return false
}
