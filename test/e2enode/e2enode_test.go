package e2enode_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/podsapi/podsapi/test/childproc"
	"github.com/podsapi/podsapi/test/e2enode"
)

// repoRoot is the root of the repository, from this package's directory.
const repoRoot = "../.."

// knownFailingPath lists the specs known to fail per target, each explained
// in conformance/e2e-node-known-differences.md.
const knownFailingPath = repoRoot + "/conformance/e2e-node.known-failing"

// outEnv names a directory for the output of each run (make e2e-node:
// build/e2e-node); by default it is kept in the test's temporary directory.
const outEnv = "PODSAPI_E2E_NODE_OUT"

func TestMain(m *testing.M) {
	if e2enode.IsSystemctl() {
		os.Exit(e2enode.Systemctl(os.Args[1:], os.Stdout))
	}
	if nodeEnabled() == nil {
		if !e2enode.InNamespace() {
			os.Exit(e2enode.Reexec())
		}
		if err := e2enode.SetupNamespace(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// enabled returns nil when a node can run and upstream's tests are named.
func enabled() error {
	if os.Getenv(e2enode.E2EBinEnv) == "" {
		return fmt.Errorf("%s is not set: make e2e-node builds the binaries and runs these tests", e2enode.E2EBinEnv)
	}
	return nodeEnabled()
}

// nodeEnabled returns nil when the binaries of a node are named and this
// runs as root.
func nodeEnabled() error {
	for _, env := range []string{e2enode.KubeBinEnv, e2enode.KubeletBinEnv} {
		if os.Getenv(env) == "" {
			return fmt.Errorf("%s is not set: make e2e-node builds the binaries and runs these tests", env)
		}
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("the node needs root (namespaces, mounts, a network interface)")
	}
	return nil
}

// target is what serves the socket upstream's tests dial.
type target struct {
	// name names the subtest and the target in the known-failing list.
	name string
	// source is podsapi-server's --source; empty for the kubelet itself.
	source string
}

var targets = []target{
	{name: "kubelet"},
	{name: "podsapi-kubelet-grpc", source: "kubelet-grpc"},
	{name: "podsapi-kubelet-http", source: "kubelet-http"},
	{name: "podsapi-apiserver", source: "apiserver"},
}

// TestUpstreamPodsAPI runs upstream's "Kubelet Pods API" node e2e specs,
// unchanged, on a node of its own for each target: the kubelet's own Pods
// API on the socket the specs dial, then podsapi-server on that socket fed
// by each of its kubelet and API server sources (the kubelet's own socket
// then stays in its root directory, where the specs do not look). Every
// spec passes, or fails as conformance/e2e-node.known-failing says.
func TestUpstreamPodsAPI(t *testing.T) {
	if err := enabled(); err != nil {
		t.Skip(err)
	}
	known, err := readKnownFailing(knownFailingPath)
	if err != nil {
		t.Fatal(err)
	}
	// podsapi-server, built by the first subtest that needs it, into a
	// directory that outlives the subtests.
	server, built := filepath.Join(t.TempDir(), "podsapi-server"), false
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			if tg.source != "" && !built {
				buildServer(t, server)
				built = true
			}
			out := os.Getenv(outEnv)
			if out == "" {
				out = t.TempDir()
			} else if err := os.MkdirAll(out, 0o755); err != nil {
				t.Fatal(err)
			}
			n := e2enode.Start(t)
			serve(t, n, tg, server, out)
			start := time.Now()
			logPath := filepath.Join(out, tg.name+".log")
			r, err := n.RunUpstream(t.Context(), logPath)
			if err != nil {
				t.Fatalf("%v (output: %s)", err, logPath)
			}
			t.Logf("%s: ginkgo's summary after %s (output: %s; the kubelet was restarted %d times through the systemctl shim):\n%s",
				tg.name, time.Since(start).Round(time.Second), logPath, n.Starts(), r.Summary)
			check(t, r, known[tg.name])
		})
	}
}

// check fails the test for each spec that failed and is not known to fail
// (or failed otherwise than an intermittent one is known to), for each spec
// known to fail that passed, and when the focus ran fewer specs than
// upstream has.
func check(t *testing.T, r *e2enode.Result, known []knownFailure) {
	t.Helper()
	ran := 0
	for _, s := range r.Specs {
		if strings.Contains(s.Name, e2enode.Focus) {
			ran++
		}
		k, listed := matchKnown(s.Name, known)
		switch {
		case s.Failed() && !listed:
			t.Errorf("%s: %s\n%s", s.State, s.Name, s.Failure)
		case s.Failed() && k.intermittent && !strings.Contains(s.Failure, k.failure):
			t.Errorf("%s, otherwise than it is known to fail intermittently (%q): %s\n%s", s.State, k.failure, s.Name, s.Failure)
		case s.Failed():
			t.Logf("known to fail (conformance/e2e-node-known-differences.md): %s", s.Name)
		case listed && !k.intermittent:
			t.Errorf("passed, but listed in %s as known to fail: %s (remove the line of %q)", knownFailingPath, s.Name, k.spec)
		}
	}
	if ran < upstreamSpecs {
		t.Errorf("%d specs of %q ran; upstream has %d", ran, e2enode.Focus, upstreamSpecs)
	}
}

// upstreamSpecs is the number of specs of "Kubelet Pods API" in
// k8s.io/kubernetes v1.37.2.
const upstreamSpecs = 7

// knownFailure is a line of the known-failing list.
type knownFailure struct {
	// spec is a part of the spec's name.
	spec string
	// intermittent: the spec may pass, and may fail only with failure in
	// its message.
	intermittent bool
	failure      string
}

func matchKnown(name string, known []knownFailure) (knownFailure, bool) {
	for _, k := range known {
		if strings.Contains(name, k.spec) {
			return k, true
		}
	}
	return knownFailure{}, false
}

// readKnownFailing reads lines "<target> <part of a spec's name>", or
// "<target> intermittent <part of a spec's name> => <part of its failure>",
// with comments after #.
func readKnownFailing(path string) (map[string][]knownFailure, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := make(map[string][]knownFailure)
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		name, rest, ok := strings.Cut(l, " ")
		var k knownFailure
		if spec, intermittent := strings.CutPrefix(rest, "intermittent "); intermittent {
			var failure string
			spec, failure, ok = strings.Cut(spec, " => ")
			k = knownFailure{spec: strings.TrimSpace(spec), intermittent: true, failure: strings.TrimSpace(failure)}
			ok = ok && k.failure != ""
		} else {
			k = knownFailure{spec: strings.TrimSpace(rest)}
		}
		if !ok || k.spec == "" {
			return nil, fmt.Errorf("%s:%d: want <target> <part of a spec's name>, or <target> intermittent <part of a spec's name> => <part of its failure>", path, line)
		}
		m[name] = append(m[name], k)
	}
	return m, sc.Err()
}

// TestKnownFailingFile reads the known-failing list: every line parses and
// names a target.
func TestKnownFailingFile(t *testing.T) {
	known, err := readKnownFailing(knownFailingPath)
	if err != nil {
		t.Fatal(err)
	}
	for name := range known {
		if !slices.ContainsFunc(targets, func(tg target) bool { return tg.name == name }) {
			t.Errorf("%s: unknown target %q", knownFailingPath, name)
		}
	}
}

// serve puts the target on the socket upstream's tests dial: a symbolic
// link to the kubelet's own socket directory, or podsapi-server.
func serve(t *testing.T, n *e2enode.Node, tg target, server, out string) {
	t.Helper()
	if tg.source == "" {
		link := e2enode.SocketDir
		if err := os.Symlink(filepath.Dir(n.Kubelet.Socket), link); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(link) })
		return
	}
	args := []string{"--source", tg.source, "--socket", filepath.Join(e2enode.SocketDir, "pods-api.sock"),
		"--node-name", e2enode.NodeName, "--metrics-address", freeAddress(t)}
	switch tg.source {
	case "kubelet-grpc":
		args = append(args, "--source-socket", n.Kubelet.Socket)
	case "kubelet-http":
		// A poll a second, as make conformance-kubelet polls: with the
		// default 5 s, a state that lasts less than a poll is never seen,
		// and two specs fail (conformance/e2e-node-known-differences.md).
		args = append(args, "--kubelet-url", n.Kubelet.ReadOnlyURL+"/pods", "--kubelet-poll-interval", "1s")
	case "apiserver":
		args = append(args, "--kubeconfig", n.Kubeconfig)
	}
	runServer(t, server, filepath.Join(out, tg.name+"-podsapi-server.log"), args...)
	t.Cleanup(func() { os.RemoveAll(e2enode.SocketDir) })
}

// buildServer builds podsapi-server into bin.
func buildServer(t *testing.T, bin string) {
	t.Helper()
	if err := childproc.Build(t.Context(), "", bin, "github.com/podsapi/podsapi/cmd/podsapi-server"); err != nil {
		t.Fatal(err)
	}
}

// runServer runs podsapi-server with args until the end of the test, its
// output in logPath, stopped by its PID (SIGTERM, then SIGKILL after 20 s),
// and returns its PID.
func runServer(t *testing.T, bin, logPath string, args ...string) int {
	t.Helper()
	lf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		lf.Close()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); lf.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("podsapi-server did not stop within 20 s of SIGTERM")
		}
	})
	return cmd.Process.Pid
}

// freeAddress returns a loopback address whose port was free a moment ago.
func freeAddress(t *testing.T) string {
	t.Helper()
	var lc net.ListenConfig
	l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
