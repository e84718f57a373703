package door_test

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/podsapi/podsapi/guard"
	"github.com/podsapi/podsapi/kubeapi/door"
)

// A door without an API server: no way to verify a token, nowhere to pass
// requests to; only the socket's allowed peers are served.
func TestDoorWithoutAPIServer(t *testing.T) {
	self := uint32(os.Geteuid())
	reg := prometheus.NewRegistry()
	local := newLocalDouble()
	d := door.New(local, door.WithPeerPolicy(&guard.AccessPolicy{UIDs: []uint32{self}}), door.WithRegisterer(reg))
	s := serve(t, d, door.Config{Socket: filepath.Join(t.TempDir(), "kube.sock")})
	https, sock := s.client(), s.socketClient()
	https1 := s.client()
	https1.Transport.(*http.Transport).ForceAttemptHTTP2 = false
	https1.Transport.(*http.Transport).TLSClientConfig.NextProtos = []string{"http/1.1"}
	h2c := s.socketClient()
	h2c.Transport.(*http.Transport).Protocols = new(http.Protocols)
	h2c.Transport.(*http.Transport).Protocols.SetUnencryptedHTTP2(true)
	const pods = "/api/v1/namespaces/a/pods"
	for _, tc := range []struct {
		name   string
		client *http.Client
		url    string
		token  string
		code   int
		reason string // of the Status; "" for a PodList
		says   string // a part of the Status's message
		proto  string
	}{
		{"HTTPS node's pods with a token", https, "https://" + s.addr + pods, "some-token", 401, "Unauthorized", "cannot verify credentials without an API server", "HTTP/2.0"},
		{"HTTPS node's pods without a token", https, "https://" + s.addr + pods, "", 401, "Unauthorized", "without an API server", "HTTP/2.0"},
		{"HTTPS other resource", https, "https://" + s.addr + "/api/v1/namespaces", "some-token", 503, "ServiceUnavailable", "no API server to pass other requests to", "HTTP/2.0"},
		{"HTTPS/1.1 node's pods", https1, "https://" + s.addr + pods, "some-token", 401, "Unauthorized", "without an API server", "HTTP/1.1"},
		{"socket node's pods", sock, "http://podsapi" + pods, "", 200, "", "", "HTTP/1.1"},
		{"socket h2c node's pods", h2c, "http://podsapi" + pods, "", 200, "", "", "HTTP/2.0"},
		{"socket other resource", sock, "http://podsapi/api/v1/namespaces", "", 503, "ServiceUnavailable", "--kubeconfig", "HTTP/1.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := get(t, tc.client, tc.url, tc.token)
			if a.proto != tc.proto {
				t.Errorf("protocol %s, want %s", a.proto, tc.proto)
			}
			if a.code != tc.code {
				t.Fatalf("code %d, want %d: %s", a.code, tc.code, a.body)
			}
			if tc.reason == "" {
				if !strings.Contains(string(a.body), `"kind":"PodList"`) {
					t.Fatalf("want the PodList of the local side, got %s", a.body)
				}
				return
			}
			st := a.status(t)
			if string(st.Reason) != tc.reason || !strings.Contains(st.Message, tc.says) {
				t.Fatalf("Status %s %q, want %s saying %q", st.Reason, st.Message, tc.reason, tc.says)
			}
			if tc.code == 503 && a.header.Get("Retry-After") != "" {
				t.Errorf("Retry-After %q on a refusal that retrying will not change", a.header.Get("Retry-After"))
			}
		})
	}
	for _, c := range []struct {
		route, verb, code string
		want              float64
	}{
		{"local", "list", "401", 3}, {"local", "list", "200", 2}, {"proxied", "list", "503", 2},
	} {
		got := testutil.ToFloat64(metric(t, reg, c.route, c.verb, c.code))
		if got != c.want {
			t.Errorf("podsapi_kube_api_requests_total{route=%s,verb=%s,code=%s} = %v, want %v", c.route, c.verb, c.code, got, c.want)
		}
	}
}

// metric returns the collector of one series of the door's request counter,
// read from reg.
func metric(t *testing.T, reg *prometheus.Registry, route, verb, code string) prometheus.Collector {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "series"})
	for _, f := range families {
		if f.GetName() != "podsapi_kube_api_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["route"] == route && labels["verb"] == verb && labels["code"] == code {
				g.Set(m.GetCounter().GetValue())
			}
		}
	}
	return g
}

// A peer of the socket that the policy does not allow gets 403, whatever
// it asks for.
func TestDoorSocketPeerRefused(t *testing.T) {
	other := uint32(os.Geteuid()) + 1
	d := door.New(newLocalDouble(), door.WithPeerPolicy(&guard.AccessPolicy{UIDs: []uint32{other}}))
	s := serve(t, d, door.Config{Socket: filepath.Join(t.TempDir(), "kube.sock")})
	for _, path := range []string{"/api/v1/namespaces/a/pods", "/api/v1/namespaces"} {
		a := get(t, s.socketClient(), "http://podsapi"+path, "")
		if a.code != 403 {
			t.Fatalf("%s: code %d, want 403: %s", path, a.code, a.body)
		}
		if st := a.status(t); st.Reason != "Forbidden" || !strings.Contains(st.Message, "--allowed-uids") {
			t.Fatalf("%s: Status %s %q", path, st.Reason, st.Message)
		}
	}
}

// Shutting down ends the open watches (they would hold a graceful shutdown
// for ever) and Serve returns.
func TestDoorShutdownEndsWatches(t *testing.T) {
	local := newLocalDouble()
	d := door.New(local, door.WithPeerPolicy(&guard.AccessPolicy{UIDs: []uint32{uint32(os.Geteuid())}}))
	s := serve(t, d, door.Config{Socket: filepath.Join(t.TempDir(), "kube.sock"), ShutdownTimeout: 2 * time.Second})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://podsapi/api/v1/namespaces/a/pods?watch=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.socketClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("watch: %s", resp.Status)
	}
	if err := s.stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if err := <-local.watchEnded; err == nil {
		t.Fatal("the watch ended without its context done")
	}
	if _, err := os.Stat(s.socket); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the socket file after Serve returned: %v, want it removed", err)
	}
}

// A watch beyond WithMaxWatches is refused 429 with Retry-After, and is
// served again once a watch has ended.
func TestDoorMaxWatches(t *testing.T) {
	local := newLocalDouble()
	d := door.New(local, door.WithPeerPolicy(&guard.AccessPolicy{UIDs: []uint32{uint32(os.Geteuid())}}), door.WithMaxWatches(1, 0))
	s := serve(t, d, door.Config{Socket: filepath.Join(t.TempDir(), "kube.sock")})
	const url = "http://podsapi/api/v1/namespaces/a/pods?watch=true"
	// watch opens a watch and returns its code, and what ends it.
	watch := func() (int, func()) {
		ctx, cancel := context.WithCancel(t.Context())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := s.socketClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, func() { cancel(); resp.Body.Close() }
	}
	code, end := watch()
	if code != 200 {
		t.Fatalf("first watch: %d", code)
	}
	a := get(t, s.socketClient(), url, "")
	if a.code != http.StatusTooManyRequests || a.header.Get("Retry-After") != "1" {
		t.Fatalf("second watch: %d (Retry-After %q) %s, want 429 with Retry-After 1", a.code, a.header.Get("Retry-After"), a.body)
	}
	if st := a.status(t); st.Reason != "TooManyRequests" {
		t.Fatalf("reason %s", st.Reason)
	}
	// A list is no watch: served.
	if a := get(t, s.socketClient(), "http://podsapi/api/v1/namespaces/a/pods", ""); a.code != 200 {
		t.Fatalf("list: %d %s", a.code, a.body)
	}
	end()
	<-local.watchEnded
	// The slot is freed as the handler returns, just after watchEnded:
	// ask until served, bounded by the test's deadline.
	for {
		code, end := watch()
		end()
		if code == 200 {
			<-local.watchEnded
			return
		}
		if code != http.StatusTooManyRequests {
			t.Fatalf("after the first watch ended: %d", code)
		}
	}
}
