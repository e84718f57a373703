package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/podsapi/podsapi/test/childproc"
	"github.com/podsapi/podsapi/test/kubetest"
)

// EnvServerBin is the environment variable naming a podsapi-server binary
// to run instead of building one.
const EnvServerBin = "PODSAPI_SERVER_BIN"

// Podsapi is a podsapi-server process serving one node's pods from the
// API server (--source=apiserver).
type Podsapi struct {
	// Node is the node whose pods it serves.
	Node string
	// Socket is the path of its Pods API socket (both wires: the typed one
	// and the kubelet's v1alpha1.Pods).
	Socket string
	// Addr is its front door's HTTPS host:port on loopback.
	Addr string
	// CAFile is the file of the CA that signed the door's certificate
	// (for 127.0.0.1, ::1 and localhost).
	CAFile string
	// PID is the process's.
	PID int

	metrics string // The path of its metrics socket.
}

// NodeViewPath is the path of the door's node view under its URL
// (docs/kubeapi.md, "Two views"), as podsctl kubeconfig --view node writes
// it: client-go asks <door>/views/node/api/v1/... of it.
const NodeViewPath = "/views/node"

// NodeViewHost is the door's node view as a kubeconfig's server names it
// without its scheme: the door's address and NodeViewPath.
func (p *Podsapi) NodeViewHost() string { return p.Addr + NodeViewPath }

// PodsapiOption configures a podsapi-server that StartPodsapi starts.
type PodsapiOption func(*podsapiOptions)

type podsapiOptions struct {
	flags []string
}

// WithNodeView runs podsapi-server so that its door's node view holds the
// owners of the node's pods: --workloads=apiserver (one get per owner,
// with PodsapiKindsRules). By default podsapi-server runs with
// --workloads=derive, and the node view holds no owner.
func WithNodeView() PodsapiOption {
	return WithFlags("--workloads", "apiserver")
}

// WithFlags adds flags to podsapi-server's command line, after the
// harness's own (a flag given twice takes its last value). By default there
// are none.
func WithFlags(flags ...string) PodsapiOption {
	return func(o *podsapiOptions) { o.flags = append(o.flags, flags...) }
}

// doorAddress finds the front door's address in podsapi-server's log.
var doorAddress = regexp.MustCompile(`through the Kubernetes API" address=(\S+)`)

// StartPodsapi starts podsapi-server for node with --source=apiserver as
// PodsapiUser, its front door on a free loopback port, configured by opts,
// and waits until its health service says SERVING (its source has synced
// the node's pods: an agent's first list is complete) and its door answers
// namespaces itself. It is stopped at the end of the test, and must then
// exit cleanly; its log is in the test's when the test failed.
func (c *Cluster) StartPodsapi(t testing.TB, node string, opts ...PodsapiOption) *Podsapi {
	t.Helper()
	var o podsapiOptions
	for _, opt := range opts {
		opt(&o)
	}
	bin := serverBin(t)
	dir, err := os.MkdirTemp("", "pa") // Short: it holds UNIX sockets, whose paths are bounded.
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	cert, key, _ := kubetest.ServingCert(t, dir)
	p := &Podsapi{Node: node, Socket: filepath.Join(dir, "p.sock"), CAFile: filepath.Join(dir, "serving-ca.crt"), metrics: filepath.Join(dir, "m.sock")}
	args := append([]string{
		"--source", "apiserver", "--node-name", node,
		"--kubeconfig", c.Kubeconfig(t, PodsapiUser, c.Host()),
		"--socket", p.Socket, "--metrics-address", "unix:" + p.metrics,
		"--kube-api-address", "127.0.0.1:0", "--kube-api-tls-cert-file", cert, "--kube-api-tls-private-key-file", key,
	}, o.flags...)
	proc, err := kubetest.StartProcess("podsapi-server", bin, filepath.Join(dir, "podsapi-server.log"), args...)
	if err != nil {
		t.Fatal(err)
	}
	p.PID = proc.PID()
	t.Cleanup(func() {
		proc.Stop(t)
		if err := proc.Err(); err != nil {
			t.Errorf("podsapi-server (pid %d) ended with %v", p.PID, err)
		}
		if t.Failed() {
			t.Logf("podsapi-server's log:\n%s", proc.Log())
		}
	})
	if err := proc.Await(func() error {
		m := doorAddress.FindStringSubmatch(proc.Log())
		if m == nil {
			return errors.New("the front door's address is not in the log yet")
		}
		p.Addr = m[1]
		return nil
	}); err != nil {
		t.Fatalf("%v\n%s", err, proc.Tail())
	}
	if err := proc.Await(p.serving); err != nil {
		t.Fatalf("%v\n%s", err, proc.Tail())
	}
	if err := proc.Await(func() error { return c.answersKinds(t, p) }); err != nil {
		t.Fatalf("%v\n%s", err, proc.Tail())
	}
	return p
}

// answersKinds says whether p's door answers a list of namespaces itself
// (route "local"), as PodsapiUser: its shared watch of them has synced
// (PodsapiKindsRules). Until then the door passes such lists to the API
// server, and an agent's first list would be the API server's.
func (c *Cluster) answersKinds(t testing.TB, p *Podsapi) error {
	t.Helper()
	cfg := c.Config(PodsapiUser, p.Addr)
	cfg.TLSClientConfig = rest.TLSClientConfig{CAFile: p.CAFile}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	before := p.Door(t).Route("local")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
		return err
	}
	if p.Door(t).Route("local") == before {
		return errors.New("the door passes lists of namespaces to the API server: its watch of them has not synced")
	}
	return nil
}

// serving asks podsapi's health service, on its Pods API socket, whether
// it is SERVING.
func (p *Podsapi) serving() error {
	conn, err := grpc.NewClient("unix://"+p.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return err
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("health %v", resp.GetStatus())
	}
	return nil
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// serverBin returns the podsapi-server binary: EnvServerBin's, or one built
// once per test binary from the main module (the replace's directory, with
// its own go.sum: this module does not carry the server's dependencies),
// to a path of the user's cache named after the test binary, which the
// next run rebuilds from the build cache: nothing is left behind per run.
func serverBin(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv(EnvServerBin); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("%s=%s: %v", EnvServerBin, bin, err)
		}
		return bin
	}
	buildOnce.Do(func() {
		cache, err := os.UserCacheDir()
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(cache, "podsapi", "integrations", "podsapi-server-for-"+filepath.Base(os.Args[0]))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		root, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/podsapi/podsapi").Output()
		if err != nil {
			buildErr = fmt.Errorf("go list -m github.com/podsapi/podsapi: %w", err)
			return
		}
		buildErr = childproc.Build(ctx, strings.TrimSpace(string(root)), builtBin, "./cmd/podsapi-server")
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}
