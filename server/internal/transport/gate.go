package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/errinfo"
	"github.com/podsapi/podsapi/guard"
	"github.com/podsapi/podsapi/httpguard"
)

// healthPrefix is the path prefix of the gRPC health service, open to
// every peer.
const healthPrefix = "/" + grpchealth.HealthV1ServiceName + "/"

// reflectionSuffix ends the path of the bidirectional reflection streams,
// whose clients send requests for as long as they like.
const reflectionSuffix = "/ServerReflectionInfo"

// maxReflectionStreams bounds the reflection streams one client may have
// open at once. Each answer (the descriptors of the Kubernetes protos, about
// 110 KB) stays in memory until the client reads it: 2,000 streams that
// asked and never read took a server under 256 MiB to 243 MiB. grpcurl
// opens one per invocation.
const maxReflectionStreams = 8

// gate is the HTTP middleware in front of every service of the API socket.
// It runs before a request's body is read, so that nothing a peer sends or
// holds back is awaited for long:
//   - it is the socket's one access check: a peer the access policy denies is refused at once, for every service
//     but health, without reading the body, and its connection is closed
//     once its open calls end (HTTP/2 GOAWAY, HTTP/1.1 Connection: close);
//   - the request body must arrive within readTimeout (for reflection, its
//     first message), or the call ends with DEADLINE_EXCEEDED;
//   - at most maxPending calls of one client (guard.Peer.Client: its pod,
//     its systemd unit, or else its UID) may wait for their request
//     at once: more are refused RESOURCE_EXHAUSTED at once, so that held
//     streams cost one short-lived goroutine each, not 12 KB each for the
//     read timeout (a peer may otherwise open 1,000 streams on each of
//     1,024 connections);
//   - the connection is marked as having started a request, so that it is
//     not shed as a slow preface;
//   - at most maxReflectionStreams reflection streams of one client may be
//     open at once: more are refused RESOURCE_EXHAUSTED;
//   - health and reflection calls that end with an error are counted in
//     podsapi_calls_refused_total.
type gate struct {
	next        http.Handler
	access      *guard.AccessGuard // nil: every peer is allowed
	readTimeout time.Duration      // <= 0: none
	maxPending  int                // <= 0: no limit
	pending     *clientCounter
	reflecting  *clientCounter           // open reflection streams, by client
	deadlines   *httpguard.BodyDeadlines // nil: no read timeout
	errors      *connect.ErrorWriter
	refused     *prometheus.CounterVec
}

// newGate returns the gate of access, whose next handler Transport.Wrap
// sets.
func newGate(access *guard.AccessGuard, readTimeout time.Duration, maxPending int, reg prometheus.Registerer) *gate {
	g := &gate{
		access:      access,
		readTimeout: readTimeout,
		maxPending:  maxPending,
		pending:     newClientCounter(),
		reflecting:  newClientCounter(),
		errors:      connect.NewErrorWriter(),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "podsapi_calls_refused_total",
			Help: "Number of calls to health and reflection answered with an error (an oversized, compressed-too-large or late request, a denied peer), by service and gRPC code. The Pods API counts its own in kubelet_pod_requests_total.",
		}, []string{"service", "code"}),
	}
	g.deadlines = httpguard.NewBodyDeadlines(readTimeout)
	reg.MustRegister(g.refused)
	return g
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if pc := connFrom(r.Context()); pc != nil {
		pc.startRequest()
	}
	health := strings.HasPrefix(r.URL.Path, healthPrefix)
	if !health && g.access != nil {
		if err := g.access.Check(r.Context(), r.URL.Path); err != nil {
			g.deny(w, r, err)
			return
		}
	}
	if strings.HasSuffix(r.URL.Path, reflectionSuffix) {
		client := guard.PeerFrom(r.Context()).Client(r.Context())
		if !g.reflecting.acquire(client, maxReflectionStreams) {
			g.refuse(w, r, errTooManyReflectionStreams(client, maxReflectionStreams))
			return
		}
		defer g.reflecting.release(client)
	}
	// A request without a body has nothing to wait for (and on HTTP/1.1, a
	// deadline left on the connection would end a long call).
	if r.Body != nil && r.Body != http.NoBody {
		p := guard.PeerFrom(r.Context())
		client := p.Client(r.Context())
		if !g.pending.acquire(client, g.maxPending) {
			g.refuse(w, r, errTooManyPending(client, peerUID(p), g.maxPending))
			return
		}
		body := &deadlineBody{
			body:        r.Body,
			clock:       g.deadlines.Start(w),
			timeout:     g.readTimeout,
			firstOnly:   strings.HasSuffix(r.URL.Path, reflectionSuffix),
			prefixBytes: make([]byte, 0, 5),
			release:     func() { g.pending.release(client) },
		}
		defer body.lift()
		r.Body = body
	}
	g.next.ServeHTTP(w, r)
	if svc, ok := countedService(r.URL.Path); ok {
		if code := grpcStatus(w.Header()); code != "" && code != "0" {
			g.refused.WithLabelValues(svc, codeName(code)).Inc()
		}
	}
}

// deny answers err to a denied peer without reading its request, and has
// its connection closed once its open calls end: a denied peer has no
// reason to keep one open (health, its only use, is one call).
func (g *gate) deny(w http.ResponseWriter, r *http.Request, err error) {
	// net/http's HTTP/2 server turns this header into a GOAWAY, and drops
	// it from the response.
	w.Header().Set("Connection", "close")
	if !g.errors.IsSupported(r) {
		http.Error(w, "access denied: the server does not allow this client's user or groups", http.StatusForbidden)
		return
	}
	g.refuse(w, r, err)
}

// refuse answers err without reading the request, and counts it.
func (g *gate) refuse(w http.ResponseWriter, r *http.Request, err error) {
	_ = g.errors.Write(w, r, err)
	if svc, ok := countedService(r.URL.Path); ok {
		g.refused.WithLabelValues(svc, connect.CodeOf(err).String()).Inc()
	}
}

// countedService returns the service of a health or reflection path.
func countedService(path string) (string, bool) {
	svc, _, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if !ok {
		return "", false
	}
	if svc == grpchealth.HealthV1ServiceName || strings.HasPrefix(svc, "grpc.reflection.") {
		return svc, true
	}
	return "", false
}

// grpcStatus returns the gRPC status code of a finished response, from its
// headers (trailers-only answers) or trailers.
func grpcStatus(h http.Header) string {
	if code := h.Get("Grpc-Status"); code != "" {
		return code
	}
	return h.Get(http.TrailerPrefix + "Grpc-Status")
}

// codeName returns the name of a numeric gRPC code.
func codeName(code string) string {
	n, err := strconv.ParseUint(code, 10, 32)
	if err != nil {
		return "invalid"
	}
	return connect.Code(n).String()
}

// deadlineBody is a request body that must arrive within a timeout: it is
// on its clock (httpguard.BodyDeadlines) until its body has ended or, with
// firstOnly, its first gRPC message has arrived; then it is lifted, and the
// call no longer counts as pending (release). A read that the timeout ends
// fails with a DEADLINE_EXCEEDED error naming the timeout.
type deadlineBody struct {
	body      io.ReadCloser
	clock     *httpguard.BodyClock // of the request's deadline
	timeout   time.Duration
	firstOnly bool
	release   func()

	prefixBytes []byte // the 5-byte gRPC message prefix, as it arrives
	remaining   int64  // bytes of the first message still to come
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if b.clock.Stopped() {
		return n, err
	}
	if b.firstOnly && b.firstMessageDone(p[:n]) || errors.Is(err, io.EOF) {
		b.lift()
	}
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return n, errRequestTimeout(b.timeout)
	}
	return n, err
}

// firstMessageDone follows the gRPC framing of the bytes read so far and
// reports whether the first message is complete.
func (b *deadlineBody) firstMessageDone(p []byte) bool {
	for len(p) > 0 {
		if len(b.prefixBytes) < 5 {
			k := min(5-len(b.prefixBytes), len(p))
			b.prefixBytes = append(b.prefixBytes, p[:k]...)
			p = p[k:]
			if len(b.prefixBytes) == 5 {
				b.remaining = int64(binary.BigEndian.Uint32(b.prefixBytes[1:]))
			}
			continue
		}
		k := min(int64(len(p)), b.remaining)
		b.remaining -= k
		p = p[k:]
	}
	return len(b.prefixBytes) == 5 && b.remaining == 0
}

// lift takes the call off the clock: the rest of the request is the
// client's business (a reflection client asks when it likes; an HTTP/1.1
// connection must not time out under a long watch). It is called again
// when the handler returns, which only releases the call if the body never
// ended, and makes sure expire no longer touches the writer.
func (b *deadlineBody) lift() {
	if b.clock.Stop() {
		b.release()
	}
}

func (b *deadlineBody) Close() error { return b.body.Close() }

// errTooManyPending refuses a call beyond the calls of one client waiting
// for their request.
func errTooManyPending(client string, uid uint32, limit int) error {
	return errinfo.New(connect.CodeResourceExhausted, errinfo.TooManyPending,
		fmt.Errorf("client %s (uid %d) has too many calls waiting for their request (limit %d): send each request whole, at once", client, uid, limit),
		map[string]string{"limit": strconv.Itoa(limit), "client": client})
}

// errTooManyReflectionStreams refuses a reflection stream beyond the
// client's limit.
func errTooManyReflectionStreams(client string, limit int) error {
	return errinfo.New(connect.CodeResourceExhausted, errinfo.TooManyReflectionStreams,
		fmt.Errorf("client %s has %d reflection streams open, as many as it may: end one before opening another", client, limit),
		map[string]string{"limit": strconv.Itoa(limit), "client": client})
}

// peerUID returns the UID a peer is counted under; peers without
// credentials share the UID 1<<32-1.
func peerUID(p *guard.Peer) uint32 {
	if p != nil && p.Known {
		return p.UID
	}
	return ^uint32(0)
}

// clientCounter counts something per client, under a limit.
type clientCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func newClientCounter() *clientCounter { return &clientCounter{n: make(map[string]int)} }

// acquire counts one more for client unless limit (> 0) are counted
// already.
func (c *clientCounter) acquire(client string, limit int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if limit > 0 && c.n[client] >= limit {
		return false
	}
	c.n[client]++
	return true
}

// release counts one less for client.
func (c *clientCounter) release(client string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[client]--; c.n[client] <= 0 {
		delete(c.n, client)
	}
}

// errRequestTimeout ends a call whose request did not arrive in time.
func errRequestTimeout(timeout time.Duration) error {
	return errinfo.New(connect.CodeDeadlineExceeded, errinfo.RequestTimeout,
		fmt.Errorf("the request did not arrive within %v: send it whole, at once", timeout),
		map[string]string{"timeout": timeout.String()})
}
