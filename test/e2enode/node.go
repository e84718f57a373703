package e2enode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/podsapi/podsapi/test/kubetest"
	"github.com/podsapi/podsapi/test/realkubelet"
)

// Environment variables naming the directories of the binaries.
const (
	// E2EBinEnv names the directory of e2e_node.test (make e2e-node-bin).
	E2EBinEnv = "PODSAPI_E2E_NODE_BIN"
	// KubeBinEnv names the directory of kube-apiserver and etcd (make
	// kube-bin).
	KubeBinEnv = "PODSAPI_KUBE_BIN"
	// KubeletBinEnv names the directory of the kubelet and fakecri (make
	// kubelet-tools).
	KubeletBinEnv = "PODSAPI_KUBELET_BIN"
)

// NodeName is the name of the node the kubelet registers.
const NodeName = "e2e-node"

// SocketDir is the directory of the socket upstream's tests dial
// (hard-coded in test/e2e_node/pods_api_test.go).
const SocketDir = "/var/lib/kubelet/pods-api"

// Kubelet ports: the tests look for /healthz at 127.0.0.1:10248
// (hard-coded); the API port is the kubelet's default. In the namespace of
// Reexec no other process holds them.
const (
	kubeletPort = 10250
	healthzPort = 10248
)

// nodeReadyTimeout bounds the wait for the node to register and be Ready.
const nodeReadyTimeout = 3 * time.Minute

// Node is a real node: an API server and etcd, and a kubelet registered
// with it, on upstream's fake CRI, with the control socket of the
// systemctl shim.
type Node struct {
	// Dir is the working directory of upstream's tests: it holds
	// kubelet-config (the kubelet's configuration, which the tests
	// rewrite) and bin/ (the sudo and systemctl shims).
	Dir string
	// ControlPlane is the API server and etcd.
	ControlPlane *kubetest.ControlPlane
	// Kubelet is the kubelet.
	Kubelet *realkubelet.Kubelet
	// Kubeconfig is a kubeconfig of a member of system:masters.
	Kubeconfig string

	t       testing.TB
	ctx     context.Context
	control *control
	mu      sync.Mutex
	starts  int
}

// Option configures the node Start starts.
type Option func(*realkubelet.Options)

// WithFakeCRIArgs gives fakecri more arguments (such as --nri-socket and
// --events-file). None by default.
func WithFakeCRIArgs(args ...string) Option {
	return func(o *realkubelet.Options) { o.FakeCRIArgs = append(o.FakeCRIArgs, args...) }
}

// Start starts a node in the namespaces of Reexec (it fails elsewhere) and
// stops it at the end of the test.
func Start(t testing.TB, opts ...Option) *Node {
	t.Helper()
	if !InNamespace() {
		t.Fatal("e2enode: a node runs only in the namespaces of Reexec (TestMain)")
	}
	n := &Node{Dir: t.TempDir(), t: t, ctx: context.WithoutCancel(t.Context())}
	// Upstream's node e2e API server (test/e2e_node/services/apiserver.go):
	// no controller creates service accounts, none lifts the not-ready
	// taint, and the node proxy reaches the kubelet on its InternalIP.
	n.ControlPlane = kubetest.StartWith(t, kubetest.Options{
		BinDir: os.Getenv(KubeBinEnv),
		APIServerFlags: []string{
			"--disable-admission-plugins=TaintNodesByCondition",
			"--kubelet-preferred-address-types=InternalIP",
		},
	})
	n.Kubeconfig = n.ControlPlane.Kubeconfig(t, kubetest.AdminUser, n.ControlPlane.Host())
	log, err := os.Create(filepath.Join(n.Dir, "kubelet-output.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	ko := realkubelet.Options{
		BinDir:   os.Getenv(KubeletBinEnv),
		NodeName: NodeName,
		Log:      log,
		Node: &realkubelet.NodeOptions{
			Kubeconfig:  n.Kubeconfig,
			IP:          NodeIP,
			Port:        kubeletPort,
			HealthzPort: healthzPort,
			ConfigPath:  filepath.Join(n.Dir, "kubelet-config"),
		},
	}
	for _, o := range opts {
		o(&ko)
	}
	k, err := realkubelet.Start(n.ctx, ko)
	if err != nil {
		t.Fatal(err)
	}
	n.Kubelet = k
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the end of the kubelet's log:\n%s", k.LogTail(8<<10))
		}
		if err := k.Close(); err != nil {
			t.Errorf("stop the kubelet: %v", err)
		}
	})
	if err := n.waitReady(); err != nil {
		t.Fatalf("%v\n%s", err, k.LogTail(8<<10))
	}
	bin := filepath.Join(n.Dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeShims(bin); err != nil {
		t.Fatal(err)
	}
	n.control, err = newControl(filepath.Join(n.Dir, "systemctl.sock"), n, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.control.close)
	return n
}

// waitReady waits until the node is registered and Ready.
func (n *Node) waitReady() error {
	ctx, cancel := context.WithTimeout(n.ctx, nodeReadyTimeout)
	defer cancel()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := errors.New("not registered")
	for {
		node, err := n.ControlPlane.Admin.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err == nil {
			last = fmt.Errorf("not Ready: %v", node.Status.Conditions)
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					return nil
				}
			}
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("e2enode: node %s not Ready within %s: %v", NodeName, nodeReadyTimeout, last)
		case <-n.Kubelet.Exited():
			return fmt.Errorf("e2enode: the kubelet exited before node %s was Ready (%v)", NodeName, last)
		case <-tick.C:
		}
	}
}

// Env returns the environment of upstream's tests: the shims first on
// PATH, and the control socket for the systemctl shim.
func (n *Node) Env() []string {
	return append(os.Environ(),
		"PATH="+filepath.Join(n.Dir, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"),
		controlEnv+"="+filepath.Join(n.Dir, "systemctl.sock"))
}

// Starts returns how many times the systemctl shim started the kubelet.
func (n *Node) Starts() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.starts
}

// running, stop and start are what the systemctl shim drives.
func (n *Node) running() bool {
	if ch := n.Kubelet.Exited(); ch != nil {
		select {
		case <-ch:
			return false
		default:
			return true
		}
	}
	return false
}

func (n *Node) stop() error { return n.Kubelet.StopKubelet() }

func (n *Node) start() error {
	if err := normalizeConfig(filepath.Join(n.Dir, "kubelet-config"), n.t.Logf); err != nil {
		return err
	}
	n.mu.Lock()
	n.starts++
	n.mu.Unlock()
	return n.Kubelet.StartKubelet(n.ctx)
}

// normalizeConfig makes a configuration that went through /configz one the
// kubelet accepts here: an empty enforceNodeAllocatable comes back from
// /configz defaulted to ["pods"], which a kubelet without cgroupsPerQOS
// refuses; it becomes ["none"]. The kubelet is started with ["none"],
// which survives the round trip, so this guards a configuration written by
// hand.
func normalizeConfig(path string, logf func(string, ...any)) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("e2enode: %s: %w", path, err)
	}
	ena, _ := cfg["enforceNodeAllocatable"].([]any)
	perQOS, _ := cfg["cgroupsPerQOS"].(bool)
	if perQOS || len(ena) != 1 || ena[0] != "pods" {
		return nil
	}
	cfg["enforceNodeAllocatable"] = []string{"none"}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	logf("kubelet-config: enforceNodeAllocatable [pods] made [none] (cgroupsPerQOS is false)")
	return os.WriteFile(path, out, 0o644)
}
