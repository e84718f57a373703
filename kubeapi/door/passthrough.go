package door

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"

	"k8s.io/client-go/rest"
)

// DefaultMaxRequestBytes is the largest request body passed to the API
// server: the API server's own bound on a request body (3 MiB), which it
// answers 413 beyond as the door does.
const DefaultMaxRequestBytes = 3 << 20

// PassThrough passes requests to the API server unchanged, with the
// caller's own credentials (its Authorization header, or none) and never
// podsapi's: its transport carries the API server's address and the CA it
// is verified by, and nothing else of the configuration it was made from.
// Responses stream as they come (watches), and upgrades (kubectl exec,
// attach, port-forward: SPDY or WebSocket) are passed through too, so that
// the API server authorizes them as it authorizes the caller.
type PassThrough struct {
	// proxy passes requests, watchProxy watches: the same, copying with
	// small buffers (watchBuffers).
	proxy, watchProxy *httputil.ReverseProxy
	maxBytes          int64
}

// watchBufferBytes is the size of the buffer a passed-through watch's
// events are copied through, for as long as the watch lasts: its events
// are small, and a caller's share of watches (WithMaxWatches) holds a
// thousand of them, so the proxy's default 32 KiB would be 32 MiB of them.
const watchBufferBytes = 4 << 10

// watchBuffers are the copy buffers of passed-through watches.
type watchBuffers struct{ pool sync.Pool }

func (b *watchBuffers) Get() []byte {
	if buf, ok := b.pool.Get().(*[]byte); ok {
		return *buf
	}
	return make([]byte, watchBufferBytes)
}

func (b *watchBuffers) Put(buf []byte) { b.pool.Put(&buf) }

// PassThroughOption configures NewPassThrough.
type PassThroughOption func(*PassThrough)

// WithMaxRequestBytes bounds the body of a passed-through request (default
// DefaultMaxRequestBytes); a larger one is refused 413.
func WithMaxRequestBytes(n int64) PassThroughOption {
	return func(p *PassThrough) { p.maxBytes = n }
}

// NewPassThrough returns the pass-through to the API server of cfg. Only
// cfg's address, TLS verification (CA, server name) and dialer are used:
// its credentials (token, client certificate, exec or auth provider,
// impersonation) never are.
func NewPassThrough(cfg *rest.Config, opts ...PassThroughOption) (*PassThrough, error) {
	anon := rest.AnonymousClientConfig(cfg)
	anon.UserAgent = "" // The caller's own User-Agent goes through.
	rt, err := rest.TransportFor(anon)
	if err != nil {
		return nil, fmt.Errorf("transport to the API server: %w", err)
	}
	target, _, err := rest.DefaultServerUrlFor(anon)
	if err != nil {
		return nil, fmt.Errorf("API server address: %w", err)
	}
	target = &url.URL{Scheme: target.Scheme, Host: target.Host, Path: target.Path}
	p := &PassThrough{maxBytes: DefaultMaxRequestBytes}
	for _, o := range opts {
		o(p)
	}
	p.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = "" // The API server's own name, as a client of it sends.
		},
		Transport:      rt,
		FlushInterval:  -1, // Watch events go out as they come.
		ErrorHandler:   p.failed,
		ModifyResponse: answered,
	}
	watch := *p.proxy
	watch.BufferPool = &watchBuffers{}
	p.watchProxy = &watch
	return p, nil
}

// ServeHTTP passes r to the API server and copies its answer back.
func (p *PassThrough) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength > p.maxBytes {
		writeStatus(w, errTooLarge(p.maxBytes))
		return
	}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = http.MaxBytesReader(w, r.Body, p.maxBytes)
	}
	if watches(r) {
		p.watchProxy.ServeHTTP(w, r)
		return
	}
	p.proxy.ServeHTTP(w, r)
}

// failed answers a request the API server did not answer.
func (p *PassThrough) failed(w http.ResponseWriter, r *http.Request, err error) {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeStatus(w, errTooLarge(p.maxBytes))
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The caller went away: nobody to answer.
		w.WriteHeader(statusClientClosed)
	default:
		writeStatus(w, errUpstreamUnreachable())
	}
}

// answerKey carries, in the context of a passed request, what to do with
// the API server's answer to it (WithAnswer).
type answerKey struct{}

// WithAnswer returns r with f called with the status of the API server's
// final answer to it, before that answer is copied to the caller: never
// with a status the pass-through makes itself (413 for a body too large,
// 503 when the API server could not be reached), which says nothing of
// whether the API server took its caller's credentials.
func WithAnswer(r *http.Request, f func(code int)) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), answerKey{}, f))
}

// answered is the proxies' ModifyResponse: it tells the request's
// WithAnswer of the API server's answer.
func answered(resp *http.Response) error {
	if f, ok := resp.Request.Context().Value(answerKey{}).(func(int)); ok && resp.StatusCode >= http.StatusOK {
		f(resp.StatusCode)
	}
	return nil
}

// statusClientClosed is the code counted for a request whose caller left
// before it was answered (nginx's 499); it is never sent.
const statusClientClosed = 499
