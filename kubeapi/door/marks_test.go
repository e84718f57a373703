package door_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/podsapi/podsapi/kubeapi"
	"github.com/podsapi/podsapi/kubeapi/door"
)

// publicVersion is the local double that also claims GET /version, needing
// the right to get that path, which a door without an API server serves to
// anyone, as kubeapi.Handler's discovery.
type publicVersion struct{ *localDouble }

func (v publicVersion) Local(r *http.Request) ([]kubeapi.Access, bool) {
	if r.Method == http.MethodGet && r.URL.Path == "/version" {
		return []kubeapi.Access{{Verb: "get", Path: "/version"}}, true
	}
	return v.localDouble.Local(r)
}

func (v publicVersion) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/version" {
		_, _ = io.WriteString(w, `{"major":"1","minor":"37"}`)
		return
	}
	v.localDouble.ServeHTTP(w, r)
}

// A connection counts as an authenticated caller's (shed last at the
// connection bound) only when a caller authenticated on it: when the API
// server took the token of a request passed to it, never when the door
// answered the request itself (the API server unreachable) nor when it
// served its public discovery to a caller without credentials.
func TestConnectionAuthenticatedOnlyByCredentials(t *testing.T) {
	answering := func(code int) string {
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(code) }))
		t.Cleanup(up.Close)
		return up.URL
	}
	// An address where nothing listens: a port just freed.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unreachable := "http://" + l.Addr().String()
	l.Close()

	for _, tc := range []struct {
		name     string
		upstream string // "": no API server
		path     string
		code     int
		// kept: the connection of the request counts as an authenticated
		// caller's, and the idle one beside it is shed instead.
		kept bool
	}{
		{"TokenTakenByTheAPIServer", answering(http.StatusOK), "/api/v1/configmaps", 200, true},
		{"TokenTakenButForbidden", answering(http.StatusForbidden), "/api/v1/configmaps", 403, true},
		{"TokenRefusedByTheAPIServer", answering(http.StatusUnauthorized), "/api/v1/configmaps", 401, false},
		{"APIServerUnreachable", unreachable, "/api/v1/configmaps", 503, false},
		{"PublicDiscoveryWithoutAPIServer", "", "/version", 200, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []door.Option
			if tc.upstream != "" {
				pass, err := door.NewPassThrough(&rest.Config{Host: tc.upstream})
				if err != nil {
					t.Fatal(err)
				}
				opts = append(opts, door.WithPassThrough(pass))
			}
			s := serve(t, door.New(publicVersion{newLocalDouble()}, opts...), door.Config{MaxConnections: 2})
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(s.ca)
			dial := func() net.Conn {
				c, err := tls.Dial("tcp", s.addr, &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				_ = c.SetDeadline(time.Now().Add(time.Minute))
				return c
			}
			// idle never sends a request; the other sends one, with a
			// token the door cannot tell, after it: the idlest would be
			// shed first, were it not for the ranks.
			idle, asked := dial(), dial()
			br := bufio.NewReader(asked)
			ask := func(request string) int {
				if _, err := io.WriteString(asked, request); err != nil {
					t.Fatal(err)
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return resp.StatusCode
			}
			if code := ask("GET " + tc.path + " HTTP/1.1\r\nHost: podsapi\r\nAuthorization: Bearer garbage\r\n\r\n"); code != tc.code {
				t.Fatalf("answer %d, want %d", code, tc.code)
			}
			// An answer streamed from the API server may arrive before its
			// request has ended on the door: the next request on the
			// connection is read only after it has (one without
			// credentials, which authenticates nothing).
			if code := ask("GET /api/v1/namespaces/a/pods HTTP/1.1\r\nHost: podsapi\r\n\r\n"); code != http.StatusUnauthorized {
				t.Fatalf("a request without credentials: %d, want 401", code)
			}
			// A third connection takes the slot of one of them.
			third := dial()
			if _, err := io.WriteString(third, "GET /api/v1/namespaces/a/pods HTTP/1.1\r\nHost: podsapi\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			if _, err := http.ReadResponse(bufio.NewReader(third), nil); err != nil {
				t.Fatal(err)
			}
			shed, spared := asked, idle
			if tc.kept {
				shed, spared = idle, asked
			}
			// The one shed was closed before the third was answered: its
			// end is there to read; the other's read waits.
			if _, err := shed.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
				t.Fatalf("the connection that should be shed: %v, want closed", err)
			}
			_ = spared.SetReadDeadline(time.Now().Add(time.Second))
			if _, err := spared.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the connection that should be kept: %v, want open", err)
			}
		})
	}
}
