package door

import (
	"context"
	"net/http"
	"time"

	"github.com/podsapi/podsapi/httpguard"
)

type graceKey struct{}

// withGrace gives the requests of ctx the grace of their HTTP/2
// connection after an unauthenticated answer (Config.UnauthenticatedGrace).
func withGrace(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, graceKey{}, d)
}

// unauthenticated ends the HTTP/2 connection of r, which carries no valid
// credentials (none, a token refused, an unverified certificate, a peer
// the policy refuses), as the API server ends it
// (k8s.io/apiserver's authentication filter): the answer says
// "Connection: close", which Go's HTTP/2 server turns into a GOAWAY, so
// that the connection takes no new stream; after its grace, it is closed
// whatever its streams are doing unless an authenticated caller's request
// is in flight on it, which finishes while the other requests are ended
// (httpguard.GoAway). It must be called before the answer is written.
// HTTP/1.1 connections are left open, as the API server leaves them: they
// carry one request at a time, and are the first shed at the connection
// bound.
func unauthenticated(w http.ResponseWriter, r *http.Request) {
	grace, _ := r.Context().Value(graceKey{}).(time.Duration)
	httpguard.GoAway(w, r, grace)
}

// authenticated marks r as an authenticated caller's work until it ends:
// its connection is not shed meanwhile, nor ended by an unauthenticated
// request on it (httpguard.Authenticated).
func authenticated(r *http.Request) { httpguard.Authenticated(r.Context()) }
