package door_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/kubeapi"
	"github.com/podsapi/podsapi/kubeapi/door"
	"github.com/podsapi/podsapi/test/kubetest"
)

// localDouble is a test double of the door's Local side only (the real one
// is kubeapi.Handler): it claims GET /api/v1/namespaces/{ns}/pods, needing
// the right to list pods in ns (with the request's selectors, as
// kubeapi.Handler names them), and answers an empty PodList, or, for a
// watch, holds the request open until it is cancelled.
type localDouble struct {
	// watchEnded receives the error of each watch's context when it ends.
	watchEnded chan error
}

func newLocalDouble() *localDouble { return &localDouble{watchEnded: make(chan error, 16)} }

func (*localDouble) Local(r *http.Request) ([]kubeapi.Access, bool) {
	p := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if r.Method == http.MethodGet && len(p) == 5 && p[0] == "api" && p[1] == "v1" && p[2] == "namespaces" && p[4] == "pods" {
		q := r.URL.Query()
		verb := "list"
		if q.Get("watch") == "true" {
			verb = "watch"
		}
		return []kubeapi.Access{{Verb: verb, Namespace: p[3], Resource: "pods", FieldSelector: q.Get("fieldSelector"), LabelSelector: q.Get("labelSelector")}}, true
	}
	return nil, false
}

func (*localDouble) Pods(*http.Request) ([]kubeapi.Access, bool) { return nil, false }

func (l *localDouble) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Query().Get("watch") == "true" {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		l.watchEnded <- r.Context().Err()
		return
	}
	_, _ = io.WriteString(w, `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
}

// served is a door serving on loopback (HTTPS) and, if asked, a UNIX socket.
type served struct {
	addr   string
	socket string
	ca     []byte
	stop   func() error // Stops the server and returns what Serve returned.
}

// serve serves d with cfg (its Address, CertFile and KeyFile filled in) and
// stops it at the end of the test.
func serve(t *testing.T, d http.Handler, cfg door.Config) *served {
	t.Helper()
	dir := t.TempDir()
	var ca []byte
	cfg.Address = "127.0.0.1:0"
	cfg.CertFile, cfg.KeyFile, ca = kubetest.ServingCert(t, dir)
	s, err := door.Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, d) }()
	var once bool
	var result error
	stop := func() error {
		if !once {
			once = true
			cancel()
			result = <-done
		}
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return &served{addr: s.Addr().String(), socket: cfg.Socket, ca: ca, stop: stop}
}

// client returns an HTTPS client of s that trusts its CA and speaks
// HTTP/2, with certs as its client certificates.
func (s *served) client(certs ...tls.Certificate) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.ca)
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, Certificates: certs},
		ForceAttemptHTTP2: true,
	}
	return &http.Client{Transport: tr}
}

// socketClient returns a client of s's UNIX socket, speaking HTTP/1.1.
func (s *served) socketClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", s.socket)
		},
	}}
}

// answer is a response read whole.
type answer struct {
	code   int
	proto  string
	header http.Header
	body   []byte
}

// status decodes the answer as a metav1.Status, failing the test when it is
// not one.
func (a answer) status(t *testing.T) metav1.Status {
	t.Helper()
	var s metav1.Status
	if err := json.Unmarshal(a.body, &s); err != nil || s.Kind != "Status" {
		t.Fatalf("answer %d is not a Status (%v): %s", a.code, err, a.body)
	}
	if int(s.Code) != a.code {
		t.Fatalf("Status code %d in an answer %d: %s", s.Code, a.code, a.body)
	}
	return s
}

// get sends GET url with the bearer token (none if empty) and reads the
// answer.
func get(t *testing.T, c *http.Client, url, token string) answer {
	t.Helper()
	return getAccept(t, c, url, token, "")
}

// getAccept is get with an Accept header (none if empty).
func getAccept(t *testing.T, c *http.Client, url, token, accept string) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("GET %s: %v", url, err)
	}
	return answer{code: resp.StatusCode, proto: resp.Proto, header: resp.Header, body: body}
}
