package kubeapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/podsapi/podsapi/kubeapi"
	"github.com/podsapi/podsapi/test/kubetest"
	"github.com/podsapi/podsapi/test/podstest"
)

// envKubectl names a kubectl v1.37.2 binary for TestKubectl; without it,
// the test looks for kubectl beside the kube-apiserver of PODSAPI_KUBE_BIN.
const envKubectl = "PODSAPI_KUBECTL"

// kubectl returns the path of kubectl, or skips the test.
func kubectl(t *testing.T) string {
	t.Helper()
	path := os.Getenv(envKubectl)
	if path == "" {
		if bin := os.Getenv(kubetest.EnvBin); bin != "" {
			path = filepath.Join(bin, "kubectl")
		}
	}
	if path == "" {
		t.Skipf("%s is not set: build kubectl v1.37.2 (docs/kubeapi.md) and point it there", envKubectl)
	}
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no kubectl: %v", err)
	}
	return path
}

// kubeconfig writes a kubeconfig for the server and returns its path.
func (s *served) kubeconfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubetest.WriteKubeconfig(t, filepath.Join(dir, "kubeconfig"), "agent", "not-checked-here",
		kubetest.Server{Name: "node", Host: s.srv.Listener.Addr().String(), CAFile: ca})
}

// TestKubectl runs an unchanged kubectl v1.37.2 against the handler with
// local discovery (a door with no upstream): get with a node's field
// selector, in its default printing (the Table the handler serves; the
// columns are compared with the API server's in TestAPIServerForms), by
// name as JSON, and a watch that sees a pod added to the store.
func TestKubectl(t *testing.T) {
	bin := kubectl(t)
	st := newStore(pod("default", "web-1", 1), pod("kube-system", "dns-1", 2))
	s := serve(t, handler(st, kubeapi.WithDiscovery()))
	kc := s.kubeconfig(t)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--kubeconfig", kc, "--cache-dir", t.TempDir()}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return string(out)
	}
	out := run("get", "pods", "-A", "--field-selector", pinned)
	t.Logf("kubectl get pods -A --field-selector %s:\n%s", pinned, out)
	for _, want := range []string{"NAME", "READY", "STATUS", "RESTARTS", "default", "web-1", "kube-system", "dns-1"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get pods -A: no %q in\n%s", want, out)
		}
	}
	if out := run("get", "pods", "-A", "--field-selector", pinned, "-o", "name"); out != "pod/web-1\npod/dns-1\n" {
		t.Errorf("kubectl get -o name: %q", out)
	}
	if out := run("get", "pod", "web-1", "-n", "default", "-o", "jsonpath={.metadata.uid} {.metadata.resourceVersion}"); out != string(podstest.UID("default", "web-1"))+" "+st.Revision(1) {
		t.Errorf("kubectl get pod web-1 -o jsonpath: %q", out)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--kubeconfig", kc, "--cache-dir", t.TempDir(), "get", "pods", "-n", "default", "-w", "--field-selector", pinned, "-o", "name")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = cmd.Wait()
	}()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	deadline, stop := podstest.NearDeadline(t)
	defer stop()
	want := []string{"pod/web-1", "pod/web-2"}
	for i := 0; i < len(want); i++ {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("kubectl get -w ended; want %q", want[i:])
			}
			if l != want[i] {
				t.Fatalf("kubectl get -w printed %q, want %q", l, want[i])
			}
			if i == 0 {
				st.Upsert(pod("default", "web-2", 3))
			}
		case <-deadline:
			t.Fatalf("kubectl get -w: no %q", want[i])
		}
	}
}

// TestKubectlVersion runs `kubectl version` against the handler with local
// discovery: make kube-bin stamps kubectl with its version, so that it
// prints both versions and exits 0 (an unstamped kubectl fails to parse
// its own v0.0.0-master).
func TestKubectlVersion(t *testing.T) {
	bin := kubectl(t)
	s := serve(t, handler(newStore(), kubeapi.WithDiscovery(), kubeapi.WithVersion("v1.37.2")))
	cmd := exec.Command(bin, "--kubeconfig", s.kubeconfig(t), "--cache-dir", t.TempDir(), "version")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl version: %v\n%s", err, out)
	}
	for _, want := range []string{"Client Version: v1.37.2", "Server Version: v1.37.2"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("kubectl version: no %q in\n%s", want, out)
		}
	}
}
