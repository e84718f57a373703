package kubeapi_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"encoding/pem"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/podsapi/podsapi/kubeapi"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// node is the node whose pods the tests serve: podstest.Pod's.
const node = "node-1"

// pinned is the field selector of an agent of the node.
const pinned = "spec.nodeName=" + node

// swap is an http.Handler whose handler a test replaces (a restart of
// podsapi behind the same address).
// It logs every request with the Content-Type of its answer.
type swap struct {
	h   atomic.Pointer[http.Handler]
	mu  sync.Mutex
	log []exchange
}

// exchange is one request and the Content-Type of its answer.
type exchange struct {
	query, accept, contentType string
	code                       int
}

func (s *swap) set(h http.Handler) { s.h.Store(&h) }

func (s *swap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(&logWriter{ResponseWriter: w, s: s, r: r}, r)
}

// exchanges returns the requests served so far.
func (s *swap) exchanges() []exchange {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// logWriter records the status code of an answer.
type logWriter struct {
	http.ResponseWriter
	s *swap
	r *http.Request
}

func (w *logWriter) WriteHeader(code int) {
	w.s.mu.Lock()
	w.s.log = append(w.s.log, exchange{query: w.r.URL.Path + "?" + w.r.URL.RawQuery, accept: w.r.Header.Get("Accept"), contentType: w.Header().Get("Content-Type"), code: code})
	w.s.mu.Unlock()
	w.ResponseWriter.WriteHeader(code)
}

func (w *logWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

// Unwrap lets http.ResponseController reach the server's writer.
func (w *logWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// served is a handler served over loopback TLS with HTTP/2, as the front
// door serves it.
type served struct {
	srv  *httptest.Server
	swap *swap
}

// serve serves h over loopback TLS with HTTP/2 until the test ends.
func serve(t *testing.T, h http.Handler) *served {
	t.Helper()
	s := &served{swap: &swap{}}
	s.swap.set(h)
	s.srv = httptest.NewUnstartedServer(s.swap)
	s.srv.EnableHTTP2 = true
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	return s
}

// servePlain serves h over loopback in plain HTTP/1.1 (as the door's UNIX
// socket does) until the test ends.
func servePlain(t *testing.T, h http.Handler) *served {
	t.Helper()
	s := &served{swap: &swap{}}
	s.swap.set(h)
	s.srv = httptest.NewServer(s.swap)
	t.Cleanup(s.srv.Close)
	return s
}

// config returns a client-go config for the server, asking for contentType
// ("" for client-go's default, JSON).
func (s *served) config(contentType string) *rest.Config {
	cfg := &rest.Config{Host: s.srv.URL}
	if s.srv.TLS != nil {
		cfg.TLSClientConfig = rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})}
	}
	if contentType != "" {
		cfg.ContentType = contentType
		cfg.AcceptContentTypes = contentType + ",application/json"
	}
	return cfg
}

// clientset returns a typed clientset of the server.
func (s *served) clientset(t *testing.T, contentType string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(s.config(contentType))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// newStore returns a synced store holding pods.
func newStore(pods ...*corev1.Pod) *store.Store {
	st := store.New()
	for _, p := range pods {
		st.Upsert(p)
	}
	st.MarkSynced()
	return st
}

// pod returns podstest.Pod's pod of namespace and name, on the node.
func pod(ns, name string, ip int) *corev1.Pod { return podstest.Pod(ns, name, ip) }

// contentTypes are the encodings client-go asks for.
var contentTypes = []struct{ name, contentType string }{
	{"json", "application/json"},
	{"protobuf", "application/vnd.kubernetes.protobuf"},
}

// handler returns the handler of st for the node.
func handler(st *store.Store, opts ...kubeapi.Option) *kubeapi.Handler {
	return kubeapi.New(st, node, opts...)
}
