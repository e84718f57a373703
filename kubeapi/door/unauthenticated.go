package door

import (
	"context"
	"net/http"
	"time"
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
// "Connection: close", which Go's HTTP/2 server turns into a GOAWAY, and
// the connection is closed after its grace whatever its streams are doing,
// since Go's server would otherwise wait for those a client holds with a
// zero receive window. It must be called before the answer is written.
// HTTP/1.1 connections are left open, as the API server leaves them: a
// response their client does not read ends within the write timeout, and
// an idle one is the first closed at the connection bound.
func unauthenticated(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 2 {
		return
	}
	w.Header().Set("Connection", "close")
	c := connFrom(r.Context())
	if c == nil {
		return
	}
	if d, ok := r.Context().Value(graceKey{}).(time.Duration); ok && d > 0 {
		c.closeAfter(d)
	}
}
