package e2enode_test

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/podsapi/podsapi/test/e2enode"
)

// TestNodeShims starts a node and drives its kubelet as upstream's tests
// do: the kubelet's /configz through the API server's node proxy, the unit
// listed by "sudo systemctl list-units", killed (its /healthz on
// 127.0.0.1:10248 stops answering) and restarted (it answers again, and the
// node is Ready).
func TestNodeShims(t *testing.T) {
	if err := nodeEnabled(); err != nil {
		t.Skip(err)
	}
	n := e2enode.Start(t)
	ctx := t.Context()
	configz, err := n.ControlPlane.Admin.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", e2enode.NodeName, "proxy/configz").DoRaw(ctx)
	if err != nil {
		t.Fatalf("/configz through the node proxy: %v", err)
	}
	if !strings.Contains(string(configz), `"enforceNodeAllocatable":["none"]`) {
		t.Errorf("/configz: want enforceNodeAllocatable [none], got %s", configz)
	}
	sudo := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, filepath.Join(n.Dir, "bin", "sudo"), args...)
		cmd.Env = n.Env()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("sudo %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	out := sudo("systemctl", "list-units", "*kubelet*", "--state=running")
	if m := regexp.MustCompile(`(kubelet-\w+)`).FindString(out); m+".service" != e2enode.Unit {
		t.Fatalf("list-units: %q, want the unit %s", out, e2enode.Unit)
	}
	sudo("systemctl", "reset-failed", "kubelet-e2enode")
	sudo("systemctl", "kill", "kubelet-e2enode")
	if healthy(ctx) {
		t.Errorf("the kubelet's /healthz answers after systemctl kill")
	}
	if out := sudo("systemctl", "list-units", "*kubelet*", "--state=running"); strings.Contains(out, "kubelet-") {
		t.Errorf("list-units --state=running lists a killed kubelet: %q", out)
	}
	sudo("systemctl", "restart", "kubelet-e2enode")
	deadline := time.Now().Add(2 * time.Minute)
	for !healthy(ctx) {
		if time.Now().After(deadline) {
			t.Fatalf("the kubelet's /healthz does not answer within 2 minutes of systemctl restart")
		}
		time.Sleep(time.Second)
	}
	if got := n.Starts(); got != 1 {
		t.Errorf("the shim started the kubelet %d times, want 1", got)
	}
}

// healthy reports whether the kubelet's /healthz answers 200.
func healthy(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:10248/healthz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
