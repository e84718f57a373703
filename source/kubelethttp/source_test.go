package kubelethttp_test

import (
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/source/kubelethttp"
	"github.com/podsapi/podsapi/test/sourcetest"
)

// webFailed matches the pods of testdata/podlist-2.json.
func webFailed(p *corev1.Pod) bool {
	return p.UID != uidWeb || p.Status.Phase == corev1.PodFailed
}

func TestName(t *testing.T) {
	tests := []struct {
		name string
		opts []kubelethttp.Option
		want string
	}{
		{name: "default", want: "kubelet-http:https://127.0.0.1:10250/pods"},
		{name: "read-only port", opts: []kubelethttp.Option{kubelethttp.WithURL("http://127.0.0.1:10255/pods")}, want: "kubelet-http:http://127.0.0.1:10255/pods"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := kubelethttp.New(tt.opts...).Name(); got != tt.want {
				t.Errorf("Name() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRunRejectsBadConfiguration(t *testing.T) {
	certFile, keyFile := clientCert(t)
	notPEM := writeFile(t, "not.pem", []byte("not a certificate\n"))
	tests := []struct {
		name string
		opts []kubelethttp.Option
	}{
		{name: "not a URL", opts: []kubelethttp.Option{kubelethttp.WithURL("://x")}},
		{name: "other scheme", opts: []kubelethttp.Option{kubelethttp.WithURL("ftp://127.0.0.1/pods")}},
		{name: "no host", opts: []kubelethttp.Option{kubelethttp.WithURL("https:///pods")}},
		{name: "missing CA file", opts: []kubelethttp.Option{kubelethttp.WithCAFile(filepath.Join(t.TempDir(), "missing.pem"))}},
		{name: "CA file without certificates", opts: []kubelethttp.Option{kubelethttp.WithCAFile(notPEM)}},
		{name: "certificate without key", opts: []kubelethttp.Option{kubelethttp.WithClientCert(certFile, "")}},
		{name: "key that does not match", opts: []kubelethttp.Option{kubelethttp.WithClientCert(certFile, notPEM)}},
		{name: "missing key file", opts: []kubelethttp.Option{kubelethttp.WithClientCert(certFile, keyFile+".missing")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := sourcetest.NewRecorder()
			if err := kubelethttp.New(tt.opts...).Run(t.Context(), rec); err == nil {
				t.Fatal("Run returned nil, want an error")
			}
			if s := rec.Snapshot(); len(s.Calls) != 0 {
				t.Errorf("sink calls:\n%s", sourcetest.FormatCalls(s.Calls))
			}
		})
	}
}

func TestPollPublishesDifferences(t *testing.T) {
	k := newFakeKubelet(t, "token-1", "podlist-1.json", httptest.NewTLSServer)
	h := start(t,
		kubelethttp.WithURL(k.url()),
		kubelethttp.WithCAFile(k.caFile()),
		kubelethttp.WithTokenFile(writeFile(t, "token", []byte("token-1\n"))),
	)
	s := h.rec.WaitPods(t, nil, uidWeb, uidProxy)
	n := len(s.Calls)
	if got, want := s.Calls[n-1].Kind, sourcetest.SyncedCall; got != want {
		t.Errorf("last call of the first poll = %s, want %s", got, want)
	}
	web := s.Pods[uidWeb]
	if web.Status.PodIP != "10.244.1.17" || web.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() != 250 ||
		web.OwnerReferences[0].Kind != "ReplicaSet" || web.Labels["tier"] != "frontend" {
		t.Errorf("web pod decoded as %+v", web)
	}

	// The same pods with fields and map keys in another order: no change.
	k.serveFile(http.StatusOK, "podlist-1-reordered.json")
	k.waitServed(3)
	k.serveFile(http.StatusOK, "podlist-2.json")
	s = h.rec.WaitPods(t, webFailed, uidWeb, uidDNS)
	var got []string
	for _, c := range s.Calls[n:] {
		got = append(got, c.String())
	}
	want := []string{
		"delete " + uidProxy,
		"upsert shop/web-7d4b9c8f5-x2x7k " + uidWeb,
		"upsert kube-system/coredns-5d78c9869d-abcde " + uidDNS,
	}
	if !slices.Equal(got, want) {
		t.Errorf("sink calls after the first poll = %q, want %q", got, want)
	}
	if v, ok := sourcetest.MetricValue(t, h.reg, "podsapi_source_last_success_timestamp_seconds",
		map[string]string{"source": "kubelet-http"}); !ok || v < float64(time.Now().Add(-time.Hour).Unix()) {
		t.Errorf("podsapi_source_last_success_timestamp_seconds = %v (exported %v), want about now", v, ok)
	}
}

func TestFailuresKeepLastKnownPods(t *testing.T) {
	tests := []struct {
		name    string
		opts    []kubelethttp.Option
		fail    func(k *fakeKubelet, tokenFile string)
		recover func(k *fakeKubelet, tokenFile string)
		reason  string
	}{
		{
			name:   "internal server error",
			fail:   func(k *fakeKubelet, _ string) { k.serveFile(http.StatusInternalServerError, "status.json") },
			reason: "status",
		},
		{
			name:    "unauthorized",
			fail:    func(k *fakeKubelet, _ string) { k.set(func(k *fakeKubelet) { k.token = "token-2" }) },
			recover: func(k *fakeKubelet, _ string) { k.set(func(k *fakeKubelet) { k.token = "token-1" }) },
			reason:  "unauthorized",
		},
		{
			name:   "malformed JSON",
			fail:   func(k *fakeKubelet, _ string) { k.serveFile(http.StatusOK, "malformed.json") },
			reason: "decode",
		},
		{
			name:   "not a pod list",
			fail:   func(k *fakeKubelet, _ string) { k.serveFile(http.StatusOK, "status.json") },
			reason: "decode",
		},
		{
			name:   "timeout",
			opts:   []kubelethttp.Option{kubelethttp.WithRequestTimeout(200 * time.Millisecond)},
			fail:   func(k *fakeKubelet, _ string) { k.set(func(k *fakeKubelet) { k.hang = true }) },
			reason: "timeout",
		},
		{
			name:   "body too large",
			opts:   []kubelethttp.Option{kubelethttp.WithMaxBodyBytes(3100)},
			fail:   func(k *fakeKubelet, _ string) { k.serveFile(http.StatusOK, "podlist-invalid.json") },
			reason: "too_large",
		},
		{
			name: "token file removed",
			fail: func(k *fakeKubelet, tokenFile string) {
				if err := os.Remove(tokenFile); err != nil {
					k.t.Fatal(err)
				}
			},
			recover: func(k *fakeKubelet, tokenFile string) {
				if err := os.WriteFile(tokenFile, []byte("token-1"), 0o600); err != nil {
					k.t.Fatal(err)
				}
			},
			reason: "token",
		},
		{
			name:   "kubelet down",
			fail:   func(k *fakeKubelet, _ string) { k.kill() },
			reason: "request",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newFakeKubelet(t, "token-1", "podlist-1.json", httptest.NewTLSServer)
			tokenFile := writeFile(t, "token", []byte("token-1\n"))
			h := start(t, append([]kubelethttp.Option{
				kubelethttp.WithURL(k.url()),
				kubelethttp.WithCAFile(k.caFile()),
				kubelethttp.WithTokenFile(tokenFile),
			}, tt.opts...)...)
			n := len(h.rec.WaitPods(t, nil, uidWeb, uidProxy).Calls)
			// A slow first poll may have timed out before the sync.
			recoveries := h.logs.Count(slog.LevelInfo, "kubelet answers again")

			tt.fail(k, tokenFile)
			h.logs.Wait(slog.LevelWarn, "kubelet unavailable: serving the last known pods", 1)
			h.logs.Wait(slog.LevelDebug, "kubelet still unavailable", 2)
			if s := h.rec.Snapshot(); len(s.Calls) != n || len(s.Pods) != 2 {
				t.Fatalf("sink calls during the outage:\n%s", sourcetest.FormatCalls(s.Calls[n:]))
			}
			if got := h.errors(t, tt.reason); got < 1 {
				t.Errorf("podsapi_source_errors_total{reason=%q} = %v, want at least 1", tt.reason, got)
			}
			if tt.name == "kubelet down" {
				return // The listener is gone for good.
			}

			if tt.recover != nil {
				tt.recover(k, tokenFile)
			}
			k.serveFile(http.StatusOK, "podlist-2.json")
			h.rec.WaitPods(t, webFailed, uidWeb, uidDNS)
			if got := h.logs.Count(slog.LevelWarn, "kubelet unavailable: serving the last known pods"); got != 1 {
				t.Errorf("outage logged %d times, want once", got)
			}
			if got := h.logs.Count(slog.LevelInfo, "kubelet answers again") - recoveries; got != 1 {
				t.Errorf("recovery logged %d times, want once", got)
			}
		})
	}
}

func TestTokenFileIsReadAtEachPoll(t *testing.T) {
	k := newFakeKubelet(t, "token-1", "podlist-1.json", httptest.NewTLSServer)
	tokenFile := writeFile(t, "token", []byte("token-1\n"))
	h := start(t, kubelethttp.WithURL(k.url()), kubelethttp.WithCAFile(k.caFile()), kubelethttp.WithTokenFile(tokenFile))
	h.rec.WaitPods(t, nil, uidWeb, uidProxy)

	// Rotate the token like the kubelet does for projected tokens: write a
	// new file and rename it into place.
	tmp := tokenFile + ".tmp"
	if err := os.WriteFile(tmp, []byte("token-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	k.set(func(k *fakeKubelet) { k.token = "token-2" })
	if err := os.Rename(tmp, tokenFile); err != nil {
		t.Fatal(err)
	}
	k.serveFile(http.StatusOK, "podlist-2.json")
	h.rec.WaitPods(t, webFailed, uidWeb, uidDNS)
}

func TestTransports(t *testing.T) {
	requireClientCert := func(h http.Handler) *httptest.Server {
		srv := httptest.NewUnstartedServer(h)
		srv.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
		srv.StartTLS()
		return srv
	}
	tests := []struct {
		name      string
		newServer func(http.Handler) *httptest.Server
		opts      func(t *testing.T, k *fakeKubelet) []kubelethttp.Option
	}{
		{
			name:      "read-only port over http",
			newServer: httptest.NewServer,
		},
		{
			name:      "https with the CA file",
			newServer: httptest.NewTLSServer,
			opts: func(_ *testing.T, k *fakeKubelet) []kubelethttp.Option {
				return []kubelethttp.Option{kubelethttp.WithCAFile(k.caFile())}
			},
		},
		{
			name:      "https without verification",
			newServer: httptest.NewTLSServer,
			opts: func(*testing.T, *fakeKubelet) []kubelethttp.Option {
				return []kubelethttp.Option{kubelethttp.WithInsecureSkipVerify(true)}
			},
		},
		{
			name:      "https with a client certificate",
			newServer: requireClientCert,
			opts: func(t *testing.T, k *fakeKubelet) []kubelethttp.Option {
				certFile, keyFile := clientCert(t)
				return []kubelethttp.Option{kubelethttp.WithCAFile(k.caFile()), kubelethttp.WithClientCert(certFile, keyFile)}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newFakeKubelet(t, "", "podlist-1.json", tt.newServer)
			opts := []kubelethttp.Option{kubelethttp.WithURL(k.url())}
			if tt.opts != nil {
				opts = append(opts, tt.opts(t, k)...)
			}
			h := start(t, opts...)
			h.rec.WaitPods(t, nil, uidWeb, uidProxy)
		})
	}
}

func TestUnverifiedCertificateIsNotTrusted(t *testing.T) {
	quietTLSServer := func(h http.Handler) *httptest.Server {
		srv := httptest.NewUnstartedServer(h)
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // The failed handshakes are expected.
		srv.StartTLS()
		return srv
	}
	k := newFakeKubelet(t, "", "podlist-1.json", quietTLSServer)
	h := start(t, kubelethttp.WithURL(k.url()))
	h.logs.Wait(slog.LevelWarn, "kubelet unavailable: not synced yet", 1)
	h.logs.Wait(slog.LevelDebug, "kubelet still unavailable", 1)
	if s := h.rec.Snapshot(); len(s.Calls) != 0 {
		t.Errorf("sink calls with an untrusted kubelet:\n%s", sourcetest.FormatCalls(s.Calls))
	}
	if got := h.errors(t, "request"); got < 2 {
		t.Errorf(`podsapi_source_errors_total{reason="request"} = %v, want at least 2`, got)
	}
}

func TestInvalidPodsAreSkippedAndCountedOnce(t *testing.T) {
	k := newFakeKubelet(t, "", "podlist-invalid.json", httptest.NewServer)
	h := start(t, kubelethttp.WithURL(k.url()))
	h.rec.WaitPods(t, nil, uidWeb, uidProxy)
	k.waitServed(3)
	k.serveFile(http.StatusOK, "podlist-2.json")
	h.rec.WaitPods(t, webFailed, uidWeb, uidDNS)
	if got := h.errors(t, "invalid"); got != 2 {
		t.Errorf(`podsapi_source_errors_total{reason="invalid"} = %v, want 2 (each problem counted when it appears)`, got)
	}
	if got := h.logs.Count(slog.LevelWarn, "kubelet listed"); got != 2 {
		t.Errorf("invalid pods logged %d times, want 2", got)
	}
}

func TestHostReplacesTheURLsHost(t *testing.T) {
	tests := []struct {
		name string
		url  string
		host string
		want string
	}{
		{name: "no host", url: "https://127.0.0.1:10250/pods", want: "https://127.0.0.1:10250/pods"},
		{name: "IPv4", url: "https://127.0.0.1:10250/pods", host: "10.0.0.7", want: "https://10.0.0.7:10250/pods"},
		{name: "IPv6", url: "https://127.0.0.1:10250/pods", host: "fd00::7", want: "https://[fd00::7]:10250/pods"},
		{name: "IPv6 in brackets", url: "https://127.0.0.1:10250/pods", host: "[fd00::7]", want: "https://[fd00::7]:10250/pods"},
		{name: "IPv6 without a port", url: "http://localhost/pods", host: "fd00::7", want: "http://[fd00::7]/pods"},
		{name: "name", url: "http://127.0.0.1:10255/pods", host: "node-1.example", want: "http://node-1.example:10255/pods"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := kubelethttp.New(kubelethttp.WithURL(tt.url), kubelethttp.WithHost(tt.host))
			if got := src.Name(); got != "kubelet-http:"+tt.want {
				t.Errorf("Name() = %q, want kubelet-http:%s", got, tt.want)
			}
		})
	}
	for _, host := range []string{"a/b", "[]", "x@y"} {
		t.Run("refused "+host, func(t *testing.T) {
			src := kubelethttp.New(kubelethttp.WithURL(kubelethttp.DefaultURL), kubelethttp.WithHost(host))
			err := src.Run(t.Context(), sourcetest.NewRecorder())
			if err == nil || !strings.Contains(err.Error(), "not a host name or an IP address") {
				t.Errorf("Run with host %q: %v, want a refusal", host, err)
			}
		})
	}
}

// TestHostOverIPv6 polls a kubelet listening on the IPv6 loopback address,
// named by WithHost as a downward-API status.hostIP would name it.
func TestHostOverIPv6(t *testing.T) {
	l, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	k := newFakeKubelet(t, "", "podlist-1.json", func(h http.Handler) *httptest.Server {
		srv := httptest.NewUnstartedServer(h)
		srv.Listener.Close()
		srv.Listener = l
		srv.StartTLS()
		return srv
	})
	port := k.srv.Listener.Addr().(*net.TCPAddr).Port
	h := start(t, kubelethttp.WithURL(fmt.Sprintf("https://127.0.0.1:%d/pods", port)), kubelethttp.WithHost("::1"),
		kubelethttp.WithInsecureSkipVerify(true))
	h.rec.WaitPods(t, nil, uidWeb, uidProxy)
}

// TestForbiddenNamesTheMissingPermission answers 403 as the kubelet does
// (pkg/kubelet/server: "Forbidden (user=..., subresource(s)=[...])") and
// checks the warning that says which permission to grant: a kubelet that
// checked only nodes/proxy has no fine-grained authorization.
func TestForbiddenNamesTheMissingPermission(t *testing.T) {
	const user = "user=system:serviceaccount:podsapi:podsapi, verb=get, resource=nodes"
	tests := []struct {
		name string
		body string
		want string
	}{
		{name: "fine-grained kubelet", body: "Forbidden (" + user + ", subresource(s)=[pods proxy])\n", want: "grant the server's identity get on nodes/pods"},
		{name: "kubelet before 1.36", body: "Forbidden (" + user + ", subresource(s)=[proxy])\n", want: "this kubelet authorizes /pods with nodes/proxy only"},
		{name: "another body", body: "forbidden\n", want: "the kubelet denies GET /pods"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newFakeKubelet(t, "", "podlist-1.json", httptest.NewServer)
			k.set(func(k *fakeKubelet) { k.status, k.body = http.StatusForbidden, []byte(tt.body) })
			h := start(t, kubelethttp.WithURL(k.url()))
			h.logs.Wait(slog.LevelWarn, "kubelet authorization: "+tt.want, 1)
			if got := h.errors(t, "unauthorized"); got < 1 {
				t.Errorf(`podsapi_source_errors_total{reason="unauthorized"} = %v, want at least 1`, got)
			}
		})
	}
}
