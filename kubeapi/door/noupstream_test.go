package door_test

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/podsapi/podsapi/guard"
	"github.com/podsapi/podsapi/kubeapi"
	"github.com/podsapi/podsapi/kubeapi/door"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/kubetest"
	"github.com/podsapi/podsapi/test/podstest"
)

// noUpstream serves the real Local side (kubeapi.Handler with local
// discovery, as Open assembles it without an API server) of a store holding
// the pod default/web-1 of node-1, behind a door with no API server, on
// HTTPS and a socket whose peer (this test) is allowed.
func noUpstream(t *testing.T) *served {
	t.Helper()
	st := store.New()
	st.Upsert(podstest.Pod("default", "web-1", 1))
	st.MarkSynced()
	local := kubeapi.New(st, "node-1", kubeapi.WithDiscovery())
	d := door.New(local, door.WithPeerPolicy(&guard.AccessPolicy{UIDs: []uint32{uint32(os.Geteuid())}}))
	return serve(t, d, door.Config{Socket: filepath.Join(t.TempDir(), "kube.sock")})
}

// Without an API server, the reads of pods that only an API server could
// answer are answered as docs/kubeapi.md says, each error saying what to do;
// discovery is public, so that kubectl reaches the request whose refusal it
// shows.
func TestDoorWithoutAPIServerAnswers(t *testing.T) {
	s := noUpstream(t)
	https, sock := s.client(), s.socketClient()
	for _, tc := range []struct {
		name   string
		client *http.Client
		url    string
		code   int
		reason string // of the Status; "" for a document
		says   string // a part of the Status's message, or of the document
	}{
		{"socket pod the node does not hold", sock, "http://podsapi/api/v1/namespaces/default/pods/nope", 404, "NotFound", `pods "nope" not found`},
		{"socket pod of the node", sock, "http://podsapi/api/v1/namespaces/default/pods/web-1", 200, "", `"name":"web-1"`},
		{"socket list not pinned", sock, "http://podsapi/api/v1/pods", 503, "ServiceUnavailable", "--field-selector spec.nodeName=node-1"},
		{"socket watch not pinned", sock, "http://podsapi/api/v1/pods?watch=true", 503, "ServiceUnavailable", "spec.nodeName=node-1"},
		{"socket other resource", sock, "http://podsapi/api/v1/namespaces", 503, "ServiceUnavailable", "--kubeconfig"},
		{"HTTPS discovery without credentials", https, "https://" + s.addr + "/api/v1", 200, "", `"name":"pods"`},
		{"HTTPS version without credentials", https, "https://" + s.addr + "/version", 200, "", `"gitVersion"`},
		{"HTTPS node's pods", https, "https://" + s.addr + "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1", 401, "Unauthorized", "cannot verify credentials without an API server"},
		{"HTTPS pod the node does not hold", https, "https://" + s.addr + "/api/v1/namespaces/default/pods/nope", 401, "Unauthorized", "cannot verify credentials"},
		{"HTTPS list not pinned", https, "https://" + s.addr + "/api/v1/pods", 401, "Unauthorized", "cannot verify credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := get(t, tc.client, tc.url, "")
			if a.code != tc.code {
				t.Fatalf("code %d, want %d: %s", a.code, tc.code, a.body)
			}
			if tc.reason == "" {
				if !strings.Contains(string(a.body), tc.says) {
					t.Fatalf("want a document with %s, got %s", tc.says, a.body)
				}
				return
			}
			st := a.status(t)
			if string(st.Reason) != tc.reason || !strings.Contains(st.Message, tc.says) {
				t.Fatalf("Status %s %q, want %s saying %q", st.Reason, st.Message, tc.reason, tc.says)
			}
		})
	}
}

// An unchanged kubectl v1.37.2 pointed at a door with no API server shows
// why it is refused, not only "You must be logged in to the server".
func TestKubectlDoorWithoutAPIServer(t *testing.T) {
	bin := os.Getenv(kubetest.EnvBin)
	if bin == "" {
		t.Skipf("%s is not set (make test-apiserver)", kubetest.EnvBin)
	}
	kubectl := filepath.Join(bin, "kubectl")
	s := noUpstream(t)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, s.ca, 0o600); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(dir, "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: node\n  cluster:\n    server: https://" + s.addr +
		"\n    certificate-authority: " + ca + "\nusers:\n- name: agent\n  user:\n    token: some-token\n" +
		"contexts:\n- name: node\n  context: {cluster: node, user: agent}\ncurrent-context: node\n"
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), kubectl, "--kubeconfig", kc, "--cache-dir", filepath.Join(dir, "cache"),
		"get", "pods", "-A", "--field-selector", "spec.nodeName=node-1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("kubectl succeeded without credentials it could verify: %s", out)
	}
	if !strings.Contains(string(out), "cannot verify credentials without an API server") {
		t.Fatalf("kubectl does not show why: %s", out)
	}
}
