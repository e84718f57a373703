// Package doorrig runs what the agents' integration tests point agents at:
// a real kube-apiserver and etcd (test/kubetest, from
// PODSAPI_KUBE_BIN) that writes an audit log of every request, and a real
// podsapi-server process of one node (--source=apiserver) serving its front
// door over HTTPS and its metrics on a UNIX socket.
//
// The audit log tells what each user asked of the API server, and so what
// an agent costs the API server directly and through podsapi; the door's
// metrics tell what podsapi answered itself and what it passed through.
package doorrig

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/test/kubetest"
)

// PodsapiUser is podsapi-server's own identity at the API server: it reads
// the pods of every node and may create TokenReviews and
// SubjectAccessReviews (system:auth-delegator), as deploy/ grants it.
const PodsapiUser = "podsapi"

// EnvServerBin names a podsapi-server binary to run instead of building
// one from this repository.
const EnvServerBin = "PODSAPI_SERVER_BIN"

// startTimeout bounds podsapi-server's start (the build of its binary
// aside): it is ready within a second on an idle machine.
const startTimeout = 2 * time.Minute

// Cluster is an API server whose audit log records every request.
type Cluster struct {
	*kubetest.ControlPlane
	audit string
	dir   string
}

// auditPolicy records every request once, when its response is complete
// (a watch: when it ends, or when it starts for the API server's
// ResponseStarted stage, which is kept so that open watches count).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
`

// StartCluster starts etcd and the API server with a token for each of
// users and for PodsapiUser, and grants PodsapiUser its roles.
func StartCluster(t testing.TB, users ...string) *Cluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "doorrig")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	audit := filepath.Join(dir, "audit.log")
	cp := kubetest.StartWith(t, kubetest.Options{
		Users: append([]string{PodsapiUser}, users...),
		APIServerFlags: []string{
			"--audit-policy-file=" + policy, "--audit-log-path=" + audit,
			"--audit-log-mode=blocking", "--audit-log-format=json",
		},
	})
	c := &Cluster{ControlPlane: cp, audit: audit, dir: dir}
	c.Bind(t, PodsapiUser, "system:auth-delegator")
	c.Grant(t, PodsapiUser, "podsapi-pods", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}})
	return c
}

// Grant gives user a cluster role of its own named name with rules.
func (c *Cluster) Grant(t testing.TB, user, name string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	if _, err := c.Admin.RbacV1().ClusterRoles().Create(t.Context(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.Bind(t, user, name)
}

// Bind binds user to the cluster role role.
func (c *Cluster) Bind(t testing.TB, user, role string) {
	t.Helper()
	if _, err := c.Admin.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-" + strings.ReplaceAll(role, ":", "-")},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Request is one request the API server's audit log recorded.
type Request struct {
	// Verb is the API server's verb: get, list, watch, create, ...
	Verb string
	// Resource is the resource asked for ("pods", "replicasets"), with
	// its subresource after a slash; empty for a non-resource URL.
	Resource string
	// URI is the request's path and query.
	URI string
	// Code is the response's status code.
	Code int
}

// Requests returns what user asked of the API server so far, in the order
// the API server answered.
func (c *Cluster) Requests(t testing.TB, user string) []Request {
	t.Helper()
	data, err := os.ReadFile(c.audit)
	if err != nil {
		t.Fatal(err)
	}
	var out []Request
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var ev struct {
			Stage      string `json:"stage"`
			Verb       string `json:"verb"`
			RequestURI string `json:"requestURI"`
			User       struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef *struct {
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
			} `json:"objectRef"`
			ResponseStatus *struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit log: %v", err)
		}
		// A watch is logged when it starts (ResponseStarted) and when it
		// ends (ResponseComplete): count it once, when it starts.
		if ev.User.Username != user || (ev.Verb == "watch" && ev.Stage != "ResponseStarted") || (ev.Verb != "watch" && ev.Stage != "ResponseComplete") {
			continue
		}
		r := Request{Verb: ev.Verb, URI: ev.RequestURI}
		if ev.ObjectRef != nil {
			r.Resource = ev.ObjectRef.Resource
			if ev.ObjectRef.Subresource != "" {
				r.Resource += "/" + ev.ObjectRef.Subresource
			}
		}
		if ev.ResponseStatus != nil {
			r.Code = ev.ResponseStatus.Code
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Count returns how many of reqs are verb of resource.
func Count(reqs []Request, verb, resource string) int {
	n := 0
	for _, r := range reqs {
		if r.Verb == verb && r.Resource == resource {
			n++
		}
	}
	return n
}

// Summary returns reqs as "verb resource" counts, sorted, for logs and
// docs.
func Summary(reqs []Request) map[string]int {
	m := make(map[string]int)
	for _, r := range reqs {
		k := r.Verb + " " + r.Resource
		if r.Resource == "" {
			k = r.Verb + " " + strings.SplitN(r.URI, "?", 2)[0]
		}
		m[k]++
	}
	return m
}

// Kubeconfig writes a kubeconfig for user with two contexts, "direct"
// (the API server) and "podsapi" (the door of p, verified by its CA), the
// current one being current, and returns its path.
func (c *Cluster) Kubeconfig(t testing.TB, user string, p *Podsapi, current string) string {
	t.Helper()
	path := filepath.Join(c.dir, "kubeconfig-"+user+"-"+current)
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: direct
  cluster:
    server: https://%s
    certificate-authority-data: %s
- name: podsapi
  cluster:
    server: https://%s
    certificate-authority: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: direct
  context: {cluster: direct, user: %s}
- name: podsapi
  context: {cluster: podsapi, user: %s}
current-context: %s
`, c.Host(), b64(c.AdminConfig.CAData), p.Addr, p.CAFile, user, c.Token(user), user, user, current)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TokenFile writes user's token into a file and returns its path, as a
// projected service account token is mounted.
func (c *Cluster) TokenFile(t testing.TB, user string) string {
	t.Helper()
	path := filepath.Join(c.dir, "token-"+user)
	if err := os.WriteFile(path, []byte(c.Token(user)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Podsapi is a podsapi-server process of one node with its front door.
type Podsapi struct {
	// Node is the node whose pods it serves.
	Node string
	// Addr is the front door's HTTPS host:port on loopback.
	Addr string
	// CA is the PEM of the CA that signed the door's certificate (for
	// 127.0.0.1, ::1 and localhost), and CAFile its path.
	CA     []byte
	CAFile string
	// PID is the process's.
	PID int

	metrics string
	logs    *syncBuffer
}

// StartPodsapi starts podsapi-server for node with --source=apiserver,
// its front door on a free loopback port, and stops it at the end of the
// test.
func (c *Cluster) StartPodsapi(t testing.TB, node string) *Podsapi {
	t.Helper()
	bin := serverBinary(t)
	dir, err := os.MkdirTemp("", "pa") // Short: it holds UNIX sockets.
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	cert, key, ca := kubetest.ServingCert(t, dir)
	p := &Podsapi{Node: node, CA: ca, CAFile: filepath.Join(dir, "serving-ca.crt"), metrics: filepath.Join(dir, "m.sock"), logs: new(syncBuffer)}
	cmd := exec.Command(bin,
		"--source", "apiserver", "--node-name", node,
		"--kubeconfig", c.ControlPlane.Kubeconfig(t, PodsapiUser, c.Host()),
		"--socket", filepath.Join(dir, "p.sock"), "--metrics-address", "unix:"+p.metrics,
		"--kube-api-address", "127.0.0.1:0", "--kube-api-tls-cert-file", cert, "--kube-api-tls-private-key-file", key)
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.PID = cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("podsapi-server did not stop within 30 s of SIGINT")
		}
		if t.Failed() {
			t.Logf("podsapi-server's logs:\n%s", p.logs.String())
		}
	})
	re := regexp.MustCompile(`through the Kubernetes API" address=(\S+)`)
	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for p.Addr == "" {
		select {
		case err := <-done:
			t.Fatalf("podsapi-server exited (%v):\n%s", err, p.logs.String())
		case <-deadline.C:
			t.Fatalf("podsapi-server's door not serving within %v:\n%s", startTimeout, p.logs.String())
		case <-tick.C:
			if m := re.FindStringSubmatch(p.logs.String()); m != nil {
				p.Addr = m[1]
			}
		}
	}
	// The source has listed the node's pods when /metrics says it last
	// succeeded: an agent's first list is then complete.
	for {
		if v, ok := p.metric(t, "podsapi_source_last_success_timestamp_seconds", nil); ok && v > 0 {
			return p
		}
		select {
		case err := <-done:
			t.Fatalf("podsapi-server exited (%v):\n%s", err, p.logs.String())
		case <-deadline.C:
			t.Fatalf("podsapi-server not synced within %v:\n%s", startTimeout, p.logs.String())
		case <-tick.C:
		}
	}
}

// Metric returns the value of the series name with labels (all of them
// given, or a subset: then the sum of those that match), from podsapi's
// /metrics; 0 when there is none.
func (p *Podsapi) Metric(t testing.TB, name string, labels map[string]string) float64 {
	t.Helper()
	v, _ := p.metric(t, name, labels)
	return v
}

func (p *Podsapi) metric(t testing.TB, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", p.metrics)
	}}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://podsapi/metrics")
	if err != nil {
		return 0, false
	}
	defer func() { _ = resp.Body.Close() }()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("podsapi's /metrics: %v", err)
	}
	f, ok := families[name]
	if !ok {
		return 0, false
	}
	sum := 0.0
	for _, m := range f.GetMetric() {
		match := true
		for k, want := range labels {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == want {
					found = true
				}
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		case m.GetUntyped() != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum, true
}

// Logs returns what podsapi-server logged so far.
func (p *Podsapi) Logs() string { return p.logs.String() }

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

// serverBinary returns EnvServerBin, or builds podsapi-server from this
// repository once per test binary.
func serverBinary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv(EnvServerBin); bin != "" {
		return bin
	}
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..", "..")
		// One path per test binary, rebuilt (from the build cache) by
		// each run: nothing is left behind per run.
		cache, err := os.UserCacheDir()
		if err != nil {
			buildErr = err
			return
		}
		buildBin = filepath.Join(cache, "podsapi", "integrations", "podsapi-server-for-"+filepath.Base(os.Args[0]))
		cmd := exec.Command("go", "build", "-o", buildBin, "./cmd/podsapi-server")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/podsapi-server in %s: %v\n%s", root, err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func b64(data []byte) string { return base64.StdEncoding.EncodeToString(data) }
