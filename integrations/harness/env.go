package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/podsapi/podsapi/test/kubetest"
)

// EnvServerBin is the environment variable naming a podsapi-server binary
// to run instead of building one.
const EnvServerBin = "PODSAPI_SERVER_BIN"

// Timeout bounds each wait of the harness (a server's start, a pod's
// creation): generous, for a busy 2-core machine.
const Timeout = 2 * time.Minute

// podsapiUser is podsapi's own identity at the API server: it reads every
// pod, and reviews the tokens and accesses of the door's callers
// (system:auth-delegator), as deploy/ grants its ServiceAccount.
const podsapiUser = "podsapi"

// Env is a control plane and a podsapi-server serving one of its nodes.
type Env struct {
	// Control is the API server and etcd.
	Control *kubetest.ControlPlane
	// Admin is a client of the API server with every right.
	Admin *kubernetes.Clientset
	// Node is the name of the node podsapi serves.
	Node string
	// Socket is the path of podsapi's Pods API socket (both wires: the
	// typed one and the kubelet's v1alpha1.Pods).
	Socket string
	// DoorAddr is the host:port of podsapi's front door (HTTPS).
	DoorAddr string
	// Dir holds the harness's files (certificates, kubeconfigs).
	Dir string

	doorCAFile, apiCAFile string
	metricsAddr           string
	server                *exec.Cmd
	logs                  *syncBuffer
}

type options struct {
	node string
	args []string
}

// Option configures Start.
type Option func(*options)

// WithNode names the node podsapi serves; the default is "node-1".
func WithNode(name string) Option { return func(o *options) { o.node = name } }

// WithServerArgs gives podsapi-server more flags, after the harness's own
// (a flag given again replaces it); none by default.
func WithServerArgs(args ...string) Option {
	return func(o *options) { o.args = append(o.args, args...) }
}

// Start starts the API server and etcd, then podsapi-server for the node
// with --source=apiserver and its front door, and waits until podsapi has
// synced its pods. Everything is stopped at the end of the test. It skips
// the test when PODSAPI_KUBE_BIN is unset.
func Start(t testing.TB, opts ...Option) *Env {
	t.Helper()
	o := options{node: "node-1"}
	for _, opt := range opts {
		opt(&o)
	}
	cp := kubetest.Start(t, podsapiUser)
	dir, err := os.MkdirTemp("", "integ") // Short: the socket's path is bounded.
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	e := &Env{Control: cp, Admin: cp.Admin, Node: o.node, Socket: filepath.Join(dir, "pods.sock"), Dir: dir}
	e.apiCAFile = filepath.Join(dir, "apiserver-ca.crt")
	writeFile(t, e.apiCAFile, cp.AdminConfig.TLSClientConfig.CAData)
	grantPodsapi(t, cp)
	cert, key, _ := kubetest.ServingCert(t, dir)
	e.doorCAFile = filepath.Join(dir, "serving-ca.crt")
	args := append([]string{
		"--source", "apiserver", "--node-name", o.node,
		"--kubeconfig", cp.Kubeconfig(t, podsapiUser, cp.Host()),
		"--socket", e.Socket, "--metrics-address", "127.0.0.1:0",
		"--kube-api-address", "127.0.0.1:0", "--kube-api-tls-cert-file", cert, "--kube-api-tls-private-key-file", key,
	}, o.args...)
	e.startServer(t, serverBin(t), args)
	return e
}

// grantPodsapi gives podsapi's identity its rights and waits until the
// API server's authorizer has them.
func grantPodsapi(t testing.TB, cp *kubetest.ControlPlane) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "podsapi"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
	}}
	if _, err := cp.Admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]string{"podsapi": "podsapi", "podsapi-delegator": "system:auth-delegator"} {
		b := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: podsapiUser}},
		}
		if _, err := cp.Admin.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c := kubernetes.NewForConfigOrDie(cp.Config(podsapiUser, cp.Host()))
	Eventually(t, "podsapi's rights", func() error {
		_, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1})
		return err
	})
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// serverBin returns the podsapi-server binary: EnvServerBin's, or one
// built once per test binary from the main module (replaced by ../).
func serverBin(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv(EnvServerBin); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("%s=%s: %v", EnvServerBin, bin, err)
		}
		return bin
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "podsapi-server")
		if err != nil {
			buildErr = err
			return
		}
		// Left for the next test of the binary: a file in the temporary
		// directory, as go test's own build outputs are.
		builtBin = filepath.Join(dir, "podsapi-server")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		// Built in the main module (the replace's directory), with its own
		// go.sum: this module does not carry the server's dependencies.
		root, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/podsapi/podsapi").Output()
		if err != nil {
			buildErr = fmt.Errorf("go list -m github.com/podsapi/podsapi: %w", err)
			return
		}
		out, err := exec.CommandContext(ctx, "go", "build", "-C", strings.TrimSpace(string(root)), "-o", builtBin, "./cmd/podsapi-server").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build podsapi-server: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// startServer runs podsapi-server with args, reads the door's and the
// metrics' addresses from its log, and waits until its health service
// says SERVING (its source has synced).
func (e *Env) startServer(t testing.TB, bin string, args []string) {
	t.Helper()
	e.logs = new(syncBuffer)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = e.logs, e.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // Never outlive the test.
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	e.server = cmd
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("podsapi-server: %v\n%s", err, e.Logs())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("podsapi-server (pid %d) did not stop within 30 s of SIGTERM: killed", cmd.Process.Pid)
		}
	})
	Eventually(t, "podsapi-server's addresses", func() error {
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("podsapi-server ended: %v\n%s", err, e.Logs())
		default:
		}
		logs := e.Logs()
		door := regexp.MustCompile(`through the Kubernetes API" address=(\S+)`).FindStringSubmatch(logs)
		metrics := regexp.MustCompile(`"serving the Pods API".* metrics=(\S+)`).FindStringSubmatch(logs)
		if door == nil || metrics == nil {
			return fmt.Errorf("not in the log yet:\n%s", logs)
		}
		e.DoorAddr, e.metricsAddr = door[1], metrics[1]
		return nil
	})
	conn, err := grpc.NewClient("unix://"+e.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	Eventually(t, "podsapi-server's health SERVING", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("health %v", resp.GetStatus())
		}
		return nil
	})
}

// Logs returns what podsapi-server has written to its stdout and stderr.
func (e *Env) Logs() string { return e.logs.String() }

// Eventually calls cond every 50 ms until it returns nil, and fails the
// test with its last error after Timeout.
func Eventually(t testing.TB, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, Timeout, err)
		}
		time.Sleep(50 * time.Millisecond) // Polls a state the test does not drive.
	}
}

// syncBuffer is a bytes.Buffer safe for a process's writes and the test's
// reads.
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

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// hostFile turns a host:port into a file name's part.
func hostFile(host string) string {
	return strings.NewReplacer(":", "-", "[", "", "]", "").Replace(host)
}
