package kubelethttp_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/source/kubelethttp"
	"github.com/podsapi/podsapi/test/sourcetest"
)

// The UIDs of the pods of testdata/.
const (
	uidWeb   = "6f1e7a52-1111-4c3b-9a57-0a1b2c3d4e01"
	uidProxy = "6f1e7a52-2222-4c3b-9a57-0a1b2c3d4e02"
	uidDNS   = "6f1e7a52-3333-4c3b-9a57-0a1b2c3d4e03"
)

// fakeKubelet is a fake kubelet /pods endpoint that checks a bearer token
// (when it has one) and answers what the test tells it.
type fakeKubelet struct {
	t   *testing.T
	srv *httptest.Server

	mu      sync.Mutex
	token   string // Expected bearer token; "" accepts any request.
	status  int
	body    []byte
	hang    bool // Answer nothing until the client gives up.
	down    bool // Abort every request's connection, as a dead kubelet would.
	served  int  // Requests answered.
	changed chan struct{}
}

// newFakeKubelet returns a fake serving testdata/file with status 200. srv
// makes the server (httptest.NewTLSServer, say); it is closed when the test
// ends.
func newFakeKubelet(t *testing.T, token, file string, newServer func(http.Handler) *httptest.Server) *fakeKubelet {
	t.Helper()
	k := &fakeKubelet{t: t, token: token, status: http.StatusOK, body: testdata(t, file), changed: make(chan struct{})}
	k.srv = newServer(http.HandlerFunc(k.serve))
	t.Cleanup(k.srv.Close)
	return k
}

func (k *fakeKubelet) serve(w http.ResponseWriter, r *http.Request) {
	k.mu.Lock()
	token, status, body, hang, down := k.token, k.status, k.body, k.hang, k.down
	k.mu.Unlock()
	if down {
		panic(http.ErrAbortHandler) // closes the connection, logs nothing
	}
	defer k.count()
	switch {
	case r.URL.Path != "/pods" || r.Method != http.MethodGet:
		http.NotFound(w, r)
	case token != "" && r.Header.Get("Authorization") != "Bearer "+token:
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
	case hang:
		<-r.Context().Done()
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}
}

func (k *fakeKubelet) count() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.served++
	close(k.changed)
	k.changed = make(chan struct{})
}

// kill stops the fake for good: the listener is closed, and so is every
// connection, including one accepted while it was being closed (its next
// request aborts it).
func (k *fakeKubelet) kill() {
	k.set(func(k *fakeKubelet) { k.down = true })
	k.srv.Listener.Close()
	k.srv.CloseClientConnections()
}

// set changes what the fake answers from now on.
func (k *fakeKubelet) set(f func(k *fakeKubelet)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	f(k)
}

// serveFile answers testdata/file with status.
func (k *fakeKubelet) serveFile(status int, file string) {
	body := testdata(k.t, file)
	k.set(func(k *fakeKubelet) { k.status, k.body, k.hang = status, body, false })
}

// waitServed waits until n more requests than now were answered.
func (k *fakeKubelet) waitServed(n int) {
	k.t.Helper()
	k.mu.Lock()
	target := k.served + n
	k.mu.Unlock()
	bound := sourcetest.WaitBound(k.t)
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	for {
		k.mu.Lock()
		served, changed := k.served, k.changed
		k.mu.Unlock()
		if served >= target {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			k.t.Fatalf("timed out waiting for %d requests; %d answered", target, served)
		}
	}
}

// url returns the URL of the fake's /pods.
func (k *fakeKubelet) url() string { return k.srv.URL + "/pods" }

// caFile writes the fake's certificate to a PEM file and returns its path.
func (k *fakeKubelet) caFile() string {
	return writeFile(k.t, "ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: k.srv.Certificate().Raw}))
}

func testdata(t *testing.T, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeFile writes data to name in the test's temporary directory.
func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// harness runs a Source until the test ends.
type harness struct {
	rec  *sourcetest.Recorder
	reg  *prometheus.Registry
	logs *sourcetest.Logs
}

// start runs a Source with a fast interval and backoff unless opts say
// otherwise, and stops it when the test ends.
func start(t *testing.T, opts ...kubelethttp.Option) *harness {
	t.Helper()
	h := &harness{rec: sourcetest.NewRecorder(), reg: prometheus.NewRegistry(), logs: sourcetest.NewLogs(t)}
	src := kubelethttp.New(append([]kubelethttp.Option{
		kubelethttp.WithLogger(h.logs.Logger()),
		kubelethttp.WithRegisterer(h.reg),
		kubelethttp.WithInterval(2 * time.Millisecond),
		kubelethttp.WithBackoff(time.Millisecond, 4*time.Millisecond),
	}, opts...)...)
	sourcetest.Run(t, func(ctx context.Context) error { return src.Run(ctx, h.rec) })
	return h
}

// errors returns podsapi_source_errors_total for reason.
func (h *harness) errors(t *testing.T, reason string) float64 {
	t.Helper()
	return sourcetest.SourceErrors(t, h.reg, "kubelet-http", reason)
}

// clientCert writes a new self-signed client certificate and its key and
// returns their paths.
func clientCert(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "system:serviceaccount:podsapi:podsapi"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, "client.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		writeFile(t, "client-key.pem", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
}
