// Package httpguard is the hardened HTTP layer that both of podsapi's front
// ends stand on: the gRPC socket (server/internal/transport) and the
// Kubernetes API's door (kubeapi/door). It owns what is below the handlers
// and the same for both:
//
//   - the connections (Listener, Conn): a bound on those open, never a
//     queue; at the bound a new connection takes the slot of one that has
//     no work in flight for an authenticated caller, those on which no
//     caller ever authenticated first, the one that has made no progress
//     for longest first, skipping those whose bytes wait unread (a client
//     whose request has not been read yet is no slowloris) unless they
//     carried only requests without valid credentials; a shed
//     connection's socket is closed a little later, so that an attacker
//     reopening it at once cannot spin the server;
//   - the deadline of request bodies (BodyDeadlines): one timer for all
//     the requests whose body is awaited, the socket's (its calls' request,
//     a reflection stream's first message) and Track's alike;
//   - the requests on them (Track): which are an authenticated caller's
//     work (Authenticated), a deadline for each request's body, a deadline
//     for the end of each response, and the end of a connection that
//     carried a request without valid credentials (GoAway), which spares
//     the authenticated streams open on it;
//   - writes that stall (StallGuard): a stream whose client stopped reading
//     is reset, a connection whose socket is full is closed;
//   - their metrics (ConnMetrics, StallGuard): connections open, refused
//     and shed, streams reset and connections closed for stalling.
//
// It knows connections, requests and peers (package guard), not what is
// served on them.
package httpguard
