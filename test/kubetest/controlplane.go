package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// EnvBin is the environment variable naming the directory of the
// kube-apiserver and etcd binaries.
const EnvBin = "PODSAPI_KUBE_BIN"

// AdminUser is the user of ControlPlane.Admin, a member of system:masters.
const AdminUser = "podsapi-test-admin"

// ControlPlane is an etcd and a kube-apiserver on loopback.
type ControlPlane struct {
	// Admin is a client of the API server with every right.
	Admin *kubernetes.Clientset
	// AdminConfig is Admin's configuration.
	AdminConfig *rest.Config

	bin, dir   string
	ca         []byte
	tokens     map[string]string // user → token
	etcdURL    string
	etcd       *Process
	apiPort    int
	apiserver  *Process
	apiStarted int
	flags      []string
}

// NodeUserPrefix starts the name of a node's user (system:node:NAME): given
// to Start, it belongs to the group system:nodes, which the API server's
// Node authorizer allows, among others, the lists and watches of the pods
// of its node (fieldSelector=spec.nodeName=NAME), and RBAC nothing.
const NodeUserPrefix = "system:node:"

// Start starts etcd and the API server, with a bearer token for AdminUser
// and for each of users (who belong to no group but system:authenticated,
// but nodes' users: see NodeUserPrefix),
// and stops them at the end of the test. It skips the test when EnvBin is
// unset.
func Start(t testing.TB, users ...string) *ControlPlane {
	t.Helper()
	return StartWith(t, Options{Users: users})
}

// Options configures a ControlPlane started by StartWith.
type Options struct {
	// BinDir is the directory of kube-apiserver and etcd; the default is
	// the one EnvBin names.
	BinDir string
	// Users are given a bearer token each, as Start's users are.
	Users []string
	// APIServerFlags are given to the API server after its default flags:
	// a flag given again replaces the default, and a list flag given again
	// (such as --disable-admission-plugins) adds to it. None by default.
	APIServerFlags []string
}

// StartWith is Start with options.
func StartWith(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	users := opts.Users
	bin := opts.BinDir
	if bin == "" {
		bin = os.Getenv(EnvBin)
	}
	if bin == "" {
		t.Skipf("%s is not set: run `make test-apiserver` to build kube-apiserver and etcd and run this test", EnvBin)
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			t.Fatalf("%s=%s: %v", EnvBin, bin, err)
		}
	}
	dir, err := os.MkdirTemp("", "kubetest")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	c := &ControlPlane{bin: bin, dir: dir, tokens: make(map[string]string), flags: opts.APIServerFlags}
	c.ca = writeCerts(t, dir)
	var csv strings.Builder
	for _, user := range append([]string{AdminUser}, users...) {
		c.tokens[user] = newToken(t)
		group := ""
		switch {
		case user == AdminUser:
			group = "system:masters"
		case strings.HasPrefix(user, NodeUserPrefix):
			group = "system:nodes"
		}
		fmt.Fprintf(&csv, "%s,%s,uid-%s,%q\n", c.tokens[user], user, user, group)
	}
	write(t, filepath.Join(dir, "tokens.csv"), []byte(csv.String()))

	c.startEtcd(t)
	t.Cleanup(func() { c.etcd.Stop(t) })
	c.StartAPIServer(t)
	t.Cleanup(func() { c.StopAPIServer(t) })

	c.AdminConfig = c.Config(AdminUser, c.Host())
	c.Admin = kubernetes.NewForConfigOrDie(c.AdminConfig)
	return c
}

// newToken returns a random bearer token.
func newToken(t testing.TB) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// freePort returns a loopback TCP port nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startEtcd starts etcd on free ports, trying others if a port was taken
// between freePort and etcd's listen.
func (c *ControlPlane) startEtcd(t testing.TB) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		c.etcdURL = "http://127.0.0.1:" + strconv.Itoa(freePort(t))
		peer := "http://127.0.0.1:" + strconv.Itoa(freePort(t))
		p, err := StartProcess("etcd", filepath.Join(c.bin, "etcd"), filepath.Join(c.dir, "etcd.log"),
			"--data-dir", filepath.Join(c.dir, "etcd"), "--listen-client-urls", c.etcdURL, "--listen-peer-urls", peer)
		if err != nil {
			t.Fatal(err)
		}
		c.etcd = p
		err = p.Await(healthy(http.DefaultClient, c.etcdURL+"/health", ""))
		if err == nil {
			return
		}
		if attempt == 3 || !strings.Contains(p.Tail(), "address already in use") {
			p.Stop(t)
			t.Fatalf("%v\n%s", err, p.Tail())
		}
		p.Stop(t)
	}
}

// StartAPIServer starts the API server, on the port it had before if it
// ran already, and waits until it is ready.
func (c *ControlPlane) StartAPIServer(t testing.TB) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		if c.apiPort == 0 {
			c.apiPort = freePort(t)
		}
		c.apiStarted++
		p, err := StartProcess("kube-apiserver", filepath.Join(c.bin, "kube-apiserver"),
			filepath.Join(c.dir, fmt.Sprintf("kube-apiserver-%d.log", c.apiStarted)), c.apiserverArgs()...)
		if err != nil {
			t.Fatal(err)
		}
		c.apiserver = p
		err = p.Await(healthy(c.httpClient(), "https://"+c.Host()+"/readyz", c.tokens[AdminUser]))
		if err == nil {
			return
		}
		retry := attempt < 3 && c.apiStarted == 1 && strings.Contains(p.Tail(), "address already in use")
		p.Stop(t)
		if !retry {
			t.Fatalf("%v\n%s", err, p.Tail())
		}
		c.apiPort = 0
	}
}

func (c *ControlPlane) apiserverArgs() []string {
	f := func(name string) string { return filepath.Join(c.dir, name) }
	return append([]string{
		"--etcd-servers=" + c.etcdURL,
		"--etcd-compaction-interval=0", // The tests compact when they mean to.
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(c.apiPort),
		"--cert-dir=" + f("certs"),
		"--tls-cert-file=" + f("apiserver.crt"),
		"--tls-private-key-file=" + f("apiserver.key"),
		"--token-auth-file=" + f("tokens.csv"),
		"--authorization-mode=Node,RBAC", // Node: for the users of NodeUserPrefix.
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + f("sa.pub"),
		"--service-account-signing-key-file=" + f("sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--endpoint-reconciler-type=none",
		"--shutdown-send-retry-after=true",
		"--disable-admission-plugins=ServiceAccount",
		"--profiling=false",
	}, c.flags...)
}

// healthy returns a condition for Process.Await: url answers 200 to a GET
// (with token as a bearer token, when given).
func healthy(client *http.Client, url, token string) func() error {
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	}
}

// StopAPIServer stops the API server and returns how long it took.
func (c *ControlPlane) StopAPIServer(t testing.TB) time.Duration {
	t.Helper()
	return c.apiserver.Stop(t)
}

// APIServerPID returns the process ID of the API server started last.
func (c *ControlPlane) APIServerPID() int { return c.apiserver.PID() }

// Host returns the API server's host:port.
func (c *ControlPlane) Host() string { return "127.0.0.1:" + strconv.Itoa(c.apiPort) }

// Config returns a client configuration for user (AdminUser or one given to
// Start) that reaches the API server at host, a host:port such as Host()
// or a Proxy's Addr().
func (c *ControlPlane) Config(user, host string) *rest.Config {
	return &rest.Config{
		Host:            "https://" + host,
		BearerToken:     c.tokens[user],
		TLSClientConfig: rest.TLSClientConfig{CAData: c.ca},
		QPS:             100,
		Burst:           200,
	}
}

// Kubeconfig writes a kubeconfig file for user reaching the API server at
// host (see Config) and returns its path.
func (c *ControlPlane) Kubeconfig(t testing.TB, user, host string) string {
	t.Helper()
	path := filepath.Join(c.dir, fmt.Sprintf("kubeconfig-%s-%s", user, strings.ReplaceAll(host, ":", "-")))
	return WriteKubeconfig(t, path, user, c.tokens[user], Server{Name: "test", Host: host, CAFile: c.CAFile()})
}

// CAFile returns the path of the file of the CA that verifies the API
// server's certificate.
func (c *ControlPlane) CAFile() string { return filepath.Join(c.dir, "ca.crt") }

func (c *ControlPlane) httpClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.ca)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}

// CompactEtcd compacts etcd's history up to its current revision, through
// etcd's JSON gateway, and returns that revision: watches that resume from
// an older one are answered 410 Gone once the API server's watch cache no
// longer holds them (after a restart of the API server).
func (c *ControlPlane) CompactEtcd(t testing.TB) int64 {
	t.Helper()
	var rng struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	c.etcdCall(t, "/v3/kv/range", map[string]any{"key": "Lw=="}, &rng) // "/"
	rev, err := strconv.ParseInt(rng.Header.Revision, 10, 64)
	if err != nil {
		t.Fatalf("etcd revision %q: %v", rng.Header.Revision, err)
	}
	c.etcdCall(t, "/v3/kv/compaction", map[string]any{"revision": strconv.FormatInt(rev, 10), "physical": true}, nil)
	return rev
}

func (c *ControlPlane) etcdCall(t testing.TB, path string, body, out any) {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.etcdURL+path, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("etcd %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("etcd %s: %s", path, resp.Status)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("etcd %s: %v", path, err)
		}
	}
}
