package door

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/guard"
	"github.com/podsapi/podsapi/internal/admit"
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
	local Local
	// nodeView is the Local side of the node view (WithNodeView); nil:
	// none.
	nodeView Local
	auth     *Auth
	pass     *PassThrough
	peers    *guard.AccessPolicy
	metrics  *metrics
	logger   *slog.Logger
	// watches bounds the watches open, local and passed through, and
	// each caller's share of them.
	watches *admit.Slots
	// handler is the filter chain (buildChain).
	handler http.Handler
	// warnings limits the warnings of failed reviews to one per kind every
	// 10 s.
	warnings *loglimit.Limiter[string]
}

// DefaultMaxWatches is the number of watches open at once by default: the
// gRPC socket's default (server.DefaultMaxWatchers).
const DefaultMaxWatches = 10000

// DefaultMaxWatchesPerCaller is the share of the door's watches one caller
// may hold open at once by default: the gRPC socket's per-client share
// (server.DefaultMaxWatchersPerClient).
const DefaultMaxWatchesPerCaller = 1000

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

// WithMaxWatches bounds the watches open at once, local and passed
// through (default DefaultMaxWatches), and the share of them one caller
// holds (default DefaultMaxWatchesPerCaller; a caller's share is the
// smaller of perCaller and half of max), so that one account cannot take
// every watch and lock the others out. 0 or negative: no bound (a caller
// with no bound of its own may hold every watch). Beyond them a watch is
// refused 429 TooManyRequests with Retry-After, which client-go retries,
// as the API server's priority and fairness refuses it.
//
// A caller is an authenticated user, by name; a peer of the UNIX socket,
// by its pod, unit or UID as the gRPC socket names it; for a passed-through
// watch, which the door does not authenticate, the user its token was seen
// authenticated as or the subject of a token signed by the cluster's
// issuer, else its token (withPassedCaller).
func WithMaxWatches(max, perCaller int) Option {
	return func(d *Door) { d.watches = admit.NewSlots(max, perCaller) }
}

// WithLogger sets the logger of the failures the door logs (authentication
// and authorization errors, at debug level). The default discards them.
func WithLogger(l *slog.Logger) Option { return func(d *Door) { d.logger = l } }

// New returns the door in front of local.
func New(local Local, opts ...Option) *Door {
	d := &Door{local: local, peers: &guard.AccessPolicy{UIDs: []uint32{0}}, watches: admit.NewSlots(DefaultMaxWatches, DefaultMaxWatchesPerCaller)}
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
	d.handler = d.buildChain()
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

// ServeHTTP answers r through the door's filter chain (handler).
func (d *Door) ServeHTTP(w http.ResponseWriter, r *http.Request) { d.handler.ServeHTTP(w, r) }

// buildChain composes the door's filters, outermost first, each a wrapper
// of the next as in k8s.io/apiserver's DefaultBuildHandlerChain: what the
// request is (withRequestInfo: its route, the accesses it needs, whether
// it watches, and its view: the node view's path is stripped), its metrics (withMetrics), the socket's peer policy
// (withPeerPolicy), then by route: for the node's pods, authentication
// (withAuthentication), authorization (withAuthorization), the watch slots
// (withWatchSlots) and the Local side; for anything else, the caller's
// name (withPassedCaller), the watch slots and the pass-through.
func (d *Door) buildChain() http.Handler {
	// The Local side of the request's view (withRequestInfo).
	view := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { infoFrom(r.Context()).view.ServeHTTP(w, r) })
	local := d.withAuthentication(d.withAuthorization(d.withWatchSlots(view)))
	passed := d.withPassedCaller(d.withWatchSlots(http.HandlerFunc(d.passThrough)))
	return d.withRequestInfo(d.withMetrics(d.withPeerPolicy(d.route(local, passed))))
}

// route sends a request to the local chain or the passed one: a request
// the Local side claims (and that asks for no impersonation) to local;
// without an API server, a read of pods that it does not claim to local
// too (withRequestInfo), and anything else is refused 503.
func (d *Door) route(local, passed http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch info := infoFrom(r.Context()); {
		case info.local:
			local.ServeHTTP(w, r)
		case d.pass != nil:
			passed.ServeHTTP(w, r)
		default:
			writeStatus(w, errNoUpstream())
		}
	})
}

// withMetrics counts each request by its route, verb and code.
func (d *Door) withMetrics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recorder{ResponseWriter: w}
		done := d.metrics.start(infoFrom(r.Context()).route)
		defer func() { done(verbOf(r), rec.status()) }()
		next.ServeHTTP(rec, r)
	})
}

// withPeerPolicy refuses 403 a peer of the UNIX socket that the access
// policy does not allow, whatever it asks.
func (d *Door) withPeerPolicy(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if peer := guard.PeerFrom(r.Context()); peer != nil && !d.peers.Allows(peer) {
			unauthenticated(w, r)
			writeStatus(w, errPeerForbidden(peer.UID, peer.Known))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// passThrough passes r to the API server, or refuses it when its caller's
// credentials cannot be passed.
func (d *Door) passThrough(w http.ResponseWriter, r *http.Request) {
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
