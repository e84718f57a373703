package door

import (
	"errors"
	"net/http"

	"github.com/podsapi/podsapi/guard"
)

// withAuthentication names the caller of a request for the node's pods,
// or refuses it: a peer of the UNIX socket (allowed by withPeerPolicy) is
// its pod, unit or UID, as the gRPC socket names it; a bearer token or a
// client certificate is the user the API server's TokenReview, or the
// client CA, names. A token is first admitted by the review budget
// (reviewBudget): a token that names the cluster's issuer without its
// signature is refused 401 without a review, and one over its budget 429
// after the tarpit's delay. A request refused for lack of valid
// credentials ends its HTTP/2 connection (unauthenticated).
func (d *Door) withAuthentication(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		info := infoFrom(ctx)
		if peer := guard.PeerFrom(ctx); peer != nil {
			info.caller = "peer/" + peer.Client(ctx)
			next.ServeHTTP(w, r)
			return
		}
		if d.auth == nil {
			unauthenticated(w, r)
			if len(info.accesses) == 1 && info.accesses[0].Path != "" {
				// The discovery of a door with no API server lists pods
				// alone and the version: public, as the API server's
				// /version is. Served to anyone, so that kubectl gets to
				// the request it came for and shows the refusal's message
				// (a 401 of discovery reaches it as "You must be logged
				// in" alone); the connection is still one without
				// credentials.
				next.ServeHTTP(w, r)
				return
			}
			writeStatus(w, errNoAuth())
			return
		}
		if d.auth.certs != nil && r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			// A client certificate first, as the API server's union
			// authenticator tries it: a verified one names the caller
			// whatever token comes with it, which is then neither
			// budgeted, nor reviewed, nor remembered as authenticated. One
			// that does not verify leaves the token to decide.
			if resp, ok, _ := d.auth.certs.AuthenticateRequest(r); ok {
				info.user, info.caller = resp.User, "user/"+resp.User.GetName()
				next.ServeHTTP(w, r)
				return
			}
		}
		token := bearerToken(r)
		if token != "" {
			switch verdict, _ := d.auth.budget.admit(ctx, sourceOf(r), token); verdict {
			case tokenRefused:
				unauthenticated(w, r)
				writeStatus(w, errUnauthorized())
				return
			case tokenThrottled:
				d.auth.budget.tarpit.Wait(ctx)
				writeStatus(w, errReviewThrottledStatus())
				return
			}
		}
		resp, ok, err := d.auth.authenticator.AuthenticateRequest(r)
		if errors.Is(err, errReviewThrottled) {
			writeStatus(w, errReviewThrottledStatus())
			return
		}
		if err != nil || !ok {
			unauthenticated(w, r)
			switch {
			case errors.Is(err, errReview):
				if ok, suppressed := d.warnings.Allow("authentication"); ok {
					d.logger.Warn("Kubernetes API: a TokenReview failed; the caller is refused 401", "path", r.URL.Path, "error", err, "suppressed", suppressed)
				}
			case err != nil:
				d.logger.Debug("kube API: unauthenticated request", "path", r.URL.Path, "error", err)
			}
			writeStatus(w, errUnauthorized())
			return
		}
		if token != "" {
			d.auth.budget.authenticated(token, resp.User.GetName())
		}
		info.user, info.caller = resp.User, "user/"+resp.User.GetName()
		next.ServeHTTP(w, r)
	})
}

// withPassedCaller names the caller of a request passed to the API
// server, which the door does not authenticate, for the watch slots: a
// peer of the UNIX socket by its client; a token by the user it was seen
// authenticated as, or the subject of a token signed by the cluster's
// issuer (checked here, never reviewed); any other token, or none, by its
// source address, as the review budget names the callers it does not
// know (a token is any string: keyed by itself, every new one would be a
// new caller with a share of its own).
func (d *Door) withPassedCaller(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		info := infoFrom(ctx)
		if !info.watch {
			next.ServeHTTP(w, r)
			return
		}
		info.caller = "addr/" + sourceOf(r)
		switch token, peer := bearerToken(r), guard.PeerFrom(ctx); {
		case peer != nil:
			info.caller = "peer/" + peer.Client(ctx)
		case token != "" && d.auth != nil:
			if user := d.auth.budget.callerOf(ctx, token); user != "" {
				info.caller = "user/" + user
			}
		}
		next.ServeHTTP(w, r)
	})
}
