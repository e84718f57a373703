package door

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/podsapi/podsapi/guard"
	"github.com/podsapi/podsapi/internal/loglimit"
	"github.com/podsapi/podsapi/kubeapi"
)

// Local is the side of the door that answers the node's pods itself
// (kubeapi.Handler).
type Local interface {
	http.Handler
	// Local reports whether the handler answers r itself and, if so, the
	// accesses r needs: r is allowed when any one of them is, tried in
	// order. No access means that an authenticated caller suffices.
	Local(r *http.Request) ([]kubeapi.Access, bool)
	// Pods reports whether r reads pods, whether Local claims it or not,
	// and the accesses it needs: a door with no API server has the
	// handler answer those it does not claim (a pod the node does not
	// hold, a list not pinned to the node), once allowed.
	Pods(r *http.Request) ([]kubeapi.Access, bool)
}

// Door routes each request to the Local side, after authenticating and
// authorizing it, or to the API server through the PassThrough. It is an
// http.Handler for Server.
type Door struct {
	local   Local
	auth    *Auth
	pass    *PassThrough
	peers   *guard.AccessPolicy
	metrics *metrics
	logger  *slog.Logger
	// watches bounds the local watches open, and each caller's share.
	watches watchSlots
	// warnings limits the warnings of failed reviews to one per kind every
	// 10 s.
	warnings *loglimit.Limiter[string]
}

// DefaultMaxWatches is the number of local watches open at once by
// default: the gRPC socket's default (server.DefaultMaxWatchers).
const DefaultMaxWatches = 10000

// Option configures New.
type Option func(*Door)

// WithAuth sets how callers are authenticated and authorized (NewAuth).
// By default none is: only the socket's peers are served, and every other
// request for the node's pods is refused 401.
func WithAuth(a *Auth) Option { return func(d *Door) { d.auth = a } }

// WithPassThrough sets the API server that requests not answered locally
// go to. By default there is none, and they are refused 503.
func WithPassThrough(p *PassThrough) Option { return func(d *Door) { d.pass = p } }

// WithPeerPolicy sets which peers of the UNIX socket may call, as the gRPC
// socket's guard.AccessPolicy does. The default allows root only.
func WithPeerPolicy(p *guard.AccessPolicy) Option { return func(d *Door) { d.peers = p } }

// WithRegisterer registers the door's metrics with reg. By default they are
// counted but registered nowhere.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(d *Door) { d.metrics = newMetrics(reg) }
}

// WithMaxWatches bounds the watches of the node's pods open at once
// (default DefaultMaxWatches; negative: no bound). Beyond it a watch is
// refused 429 TooManyRequests with Retry-After, which client-go retries,
// as the API server's priority and fairness refuses it. Passed-through
// watches are the API server's to bound.
func WithMaxWatches(n int) Option {
	return func(d *Door) {
		if n == 0 {
			n = DefaultMaxWatches
		}
		d.watches.max = n
	}
}

// WithMaxWatchesPerCaller bounds the watches of the node's pods that one
// caller (an authenticated user, by name; a peer of the UNIX socket, by
// its pod, unit or UID as the gRPC socket names it) holds open at once
// (default DefaultMaxWatchesPerCaller; negative: no share), so that one
// account cannot take every watch of WithMaxWatches. Beyond it a watch is
// refused 429 with Retry-After.
func WithMaxWatchesPerCaller(n int) Option {
	return func(d *Door) {
		if n == 0 {
			n = DefaultMaxWatchesPerCaller
		}
		d.watches.perCaller = n
	}
}

// WithLogger sets the logger of the failures the door logs (authentication
// and authorization errors, at debug level). The default discards them.
func WithLogger(l *slog.Logger) Option { return func(d *Door) { d.logger = l } }

// New returns the door in front of local.
func New(local Local, opts ...Option) *Door {
	d := &Door{local: local, peers: &guard.AccessPolicy{UIDs: []uint32{0}}, watches: watchSlots{max: DefaultMaxWatches, perCaller: DefaultMaxWatchesPerCaller}}
	for _, o := range opts {
		o(d)
	}
	if d.metrics == nil {
		d.metrics = newMetrics(nil)
	}
	if d.logger == nil {
		d.logger = slog.New(slog.DiscardHandler)
	}
	d.warnings = loglimit.New[string](10 * time.Second)
	return d
}

// WatchEnded counts a watch of the node's pods that ended, by why, and logs
// the watches that the Local side ended for a reason other than their
// timeout, their client leaving or an expired resourceVersion (at most one
// line per reason every 10 s). It is the kubeapi.WithWatchEnded of the
// Local side Open assembles.
func (d *Door) WatchEnded(r *http.Request, end kubeapi.WatchEnd) {
	d.metrics.watches.WithLabelValues(string(end)).Inc()
	switch end {
	case kubeapi.WatchTimedOut, kubeapi.WatchCancelled, kubeapi.WatchExpired:
		return
	}
	if ok, suppressed := d.warnings.Allow("watch " + string(end)); ok {
		d.logger.Warn("Kubernetes API: a watch of the node's pods was ended; its client watches again", "reason", string(end),
			"why", watchEndWhy[end], "path", r.URL.Path, "userAgent", r.UserAgent(), "remote", r.RemoteAddr, "suppressed", suppressed)
	}
}

// watchEndWhy explains the ends of a watch that WatchEnded logs.
var watchEndWhy = map[kubeapi.WatchEnd]string{
	kubeapi.WatchStalled:    "a write did not complete within the write timeout: the client stopped reading",
	kubeapi.WatchFellBehind: "the client fell behind the node's changes by more than the watch's queue",
	kubeapi.WatchFailed:     "an event could not be written",
}

// ServeHTTP answers r: a socket peer that the policy refuses gets 403; a
// request the Local side claims (and that asks for no impersonation) is
// authenticated, authorized and served by it; every other request is
// passed through.
func (d *Door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	accesses, local := d.local.Local(r)
	if local && impersonates(r) {
		// Impersonation is the API server's to check and apply.
		local = false
	}
	rec := &recorder{ResponseWriter: w}
	route := routeProxied
	if local {
		route = routeLocal
	}
	done := d.metrics.start(route)
	defer func() { done(verbOf(r), rec.status()) }()
	if peer := guard.PeerFrom(r.Context()); peer != nil && !d.peers.Allows(peer) {
		unauthenticated(rec, r)
		writeStatus(rec, errPeerForbidden(peer.UID, peer.Known))
		return
	}
	if !local {
		d.passThrough(rec, r)
		return
	}
	caller, ok := d.allowed(rec, r, accesses)
	if !ok {
		return
	}
	authenticated(r)
	if len(accesses) > 0 && accesses[0].Verb == "watch" {
		release, err := d.watches.acquire(caller)
		if err != nil {
			writeStatus(rec, err)
			return
		}
		defer release()
	}
	d.local.ServeHTTP(rec, r)
}

// allowed authenticates and authorizes a request for the node's pods, and
// writes the refusal when it is not allowed; it returns the caller by
// which its watches are counted. A peer of the UNIX socket that the policy
// allows needs neither. A request refused for lack of valid credentials
// ends its HTTP/2 connection (unauthenticated).
func (d *Door) allowed(w http.ResponseWriter, r *http.Request, accesses []kubeapi.Access) (string, bool) {
	if peer := guard.PeerFrom(r.Context()); peer != nil {
		return "peer/" + peer.Client(r.Context()), true
	}
	if d.auth == nil {
		if len(accesses) == 1 && accesses[0].Path != "" {
			// The discovery of a door with no API server lists pods alone
			// and the version: public, as the API server's /version is.
			// Served to anyone, so that kubectl gets to the request it
			// came for and shows the refusal's message (a 401 of
			// discovery reaches it as "You must be logged in" alone); the
			// connection is still one without credentials.
			unauthenticated(w, r)
			return "", true
		}
		unauthenticated(w, r)
		writeStatus(w, errNoAuth())
		return "", false
	}
	token := bearerToken(r)
	if token != "" && !d.auth.budget.allow(sourceOf(r), token) {
		d.auth.budget.tarpit(r.Context())
		writeStatus(w, errReviewBudget())
		return "", false
	}
	resp, ok, err := d.auth.authenticator.AuthenticateRequest(r)
	if errors.Is(err, errReviewThrottled) {
		writeStatus(w, errReviewBudget())
		return "", false
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
		return "", false
	}
	if token != "" {
		d.auth.budget.authenticated(token)
	}
	caller := "user/" + resp.User.GetName()
	if len(accesses) == 0 {
		return caller, true
	}
	var (
		unavailable bool
		reason      string
	)
	for i, a := range accesses {
		attrs := authorizer.AttributesRecord{User: resp.User, Verb: a.Verb, Path: a.Path}
		if a.Path == "" {
			attrs.Namespace, attrs.APIVersion, attrs.Resource, attrs.Subresource, attrs.Name =
				a.Namespace, "v1", a.Resource, a.Subresource, a.Name
			attrs.ResourceRequest, attrs.Path = true, r.URL.Path
			selectors(&attrs, a)
		}
		decision, why, err := d.auth.authorizer.Authorize(r.Context(), attrs)
		if decision == authorizer.DecisionAllow {
			return caller, true
		}
		if err != nil {
			unavailable = true
			if ok, suppressed := d.warnings.Allow("authorization"); ok {
				d.logger.Warn("Kubernetes API: a SubjectAccessReview failed; the request is refused 503", "user", resp.User.GetName(),
					"verb", a.Verb, "resource", a.Resource, "error", err, "suppressed", suppressed)
			}
		}
		if i == 0 {
			reason = why
		}
	}
	if unavailable {
		// One of the accesses might have been allowed: the API server could
		// not say.
		writeStatus(w, errAuthorizationUnavailable())
		return "", false
	}
	writeStatus(w, errForbidden(resp.User.GetName(), accesses[0], reason))
	return "", false
}

// passThrough passes r to the API server, or refuses it when there is none
// or when its caller's credentials cannot be passed.
func (d *Door) passThrough(w http.ResponseWriter, r *http.Request) {
	if d.pass == nil {
		d.withoutUpstream(w, r)
		return
	}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 && !hasToken(r) {
		// A certificate not verified here.
		unauthenticated(w, r)
		writeStatus(w, errCertNotForwardable())
		return
	}
	if !hasToken(r) {
		// Anonymous: the API server ends the HTTP/2 connections of its
		// anonymous requests (UnauthenticatedHTTP2DOSMitigation).
		unauthenticated(w, r)
	} else if rec, ok := w.(*recorder); ok {
		// The API server refused the token: the connection ends, as it
		// ends it; it accepted it: the connection carries a caller.
		rec.onHeader = func(code int) {
			if code == http.StatusUnauthorized {
				unauthenticated(w, r)
			} else {
				authenticated(r)
			}
		}
	}
	d.pass.ServeHTTP(w, r)
}

// withoutUpstream answers a request that only an API server could answer,
// on a door that has none: a read of pods (a pod the node does not hold, a
// list or watch not pinned to the node) is authorized as a local one and
// answered by the Local side (404 NotFound; 503 that names the field
// selector to add), and anything else is refused 503.
func (d *Door) withoutUpstream(w http.ResponseWriter, r *http.Request) {
	accesses, ok := d.local.Pods(r)
	if !ok || impersonates(r) {
		writeStatus(w, errNoUpstream())
		return
	}
	if _, ok := d.allowed(w, r, accesses); !ok {
		return
	}
	authenticated(r)
	d.local.ServeHTTP(w, r)
}

// impersonates reports whether r asks to act as another user.
func impersonates(r *http.Request) bool {
	for name := range r.Header {
		if strings.HasPrefix(name, "Impersonate-") {
			return true
		}
	}
	return false
}

// hasToken reports whether r carries a bearer token: in its Authorization
// header, or as a WebSocket subprotocol, as the API server accepts it.
func hasToken(r *http.Request) bool {
	if r.Header.Get("Authorization") != "" {
		return true
	}
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		if strings.Contains(v, "base64url.bearer.authorization.k8s.io.") {
			return true
		}
	}
	return false
}

// selectors gives attrs the field and label selectors of a list or watch,
// parsed as the API server parses them for its own authorizers, so that a
// SubjectAccessReview carries them (KEP-4601): an authorizer that allows a
// caller only the pods of its node (the Node authorizer, a webhook) allows
// it here as it would there.
func selectors(attrs *authorizer.AttributesRecord, a kubeapi.Access) {
	if a.FieldSelector != "" {
		if sel, err := fields.ParseSelector(a.FieldSelector); err != nil {
			attrs.FieldSelectorParsingErr = err
		} else {
			attrs.FieldSelectorRequirements = sel.Requirements()
		}
	}
	if a.LabelSelector != "" {
		if sel, err := labels.Parse(a.LabelSelector); err != nil {
			attrs.LabelSelectorParsingErr = err
		} else {
			attrs.LabelSelectorRequirements, _ = sel.Requirements()
		}
	}
}
