package deploy_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/test/childproc"
)

// TestProbesFailUntilSynced runs the real server with the DaemonSet's own
// arguments against a kubelet that does not answer /pods, and runs each of
// the DaemonSet's probe commands: while the server has not synced they must
// fail (a rolling update stops, the pod is not Ready); once the kubelet
// answers and the server has synced, they must pass.
func TestProbesFailUntilSynced(t *testing.T) {
	server, _ := load(t)
	c := server.daemonSets[0].Spec.Template.Spec.Containers[0]
	bin := buildServer(t)

	// The kubelet: holds every request until release is closed, then
	// answers an empty pod list.
	release := make(chan struct{})
	var once sync.Once
	kubelet := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"PodList","apiVersion":"v1","items":[]}`)
	}))
	defer kubelet.Close()
	defer once.Do(func() { close(release) })

	dir, err := os.MkdirTemp("", "pr")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "pods.sock")
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The DaemonSet's arguments, with the downward API's values and the
	// paths of this test; --kubelet-url names the test's kubelet, whose
	// host --kubelet-host (127.0.0.1 here, the node's IP there) replaces.
	args := expandArgs(c.Args, map[string]string{
		"NODE_IP": "127.0.0.1", "NODE_NAME": "probe-test",
	}, map[string]string{
		"socket": sock, "metrics-address": "", "kubelet-token-file": token,
	})
	args = append(args, "--kubelet-url="+kubelet.URL+"/pods")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logs, stop := startServer(t, ctx, bin, args)
	defer stop()
	logs.waitFor(t, "serving the Pods API")

	probes := map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe}
	run := func(name string, p *corev1.Probe) (string, error) {
		cmd := expandArgs(p.Exec.Command[1:], nil, map[string]string{"socket": sock})
		out, err := exec.CommandContext(ctx, bin, cmd...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	for name, p := range probes {
		out, err := run(name, p)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || !strings.Contains(out, "NOT_SERVING") {
			t.Errorf("%s probe of a server that has not synced: %v, printed %q; want a failure saying NOT_SERVING", name, err, out)
		}
	}

	once.Do(func() { close(release) })
	logs.waitFor(t, "kubelet pods synced")
	for name, p := range probes {
		if out, err := run(name, p); err != nil || out != "SERVING" {
			t.Errorf("%s probe of a synced server: %v, printed %q; want SERVING", name, err, out)
		}
	}
}

// expandArgs returns args with each $(VAR) of vars expanded and the value
// of each --flag of flags replaced.
func expandArgs(args []string, vars, flags map[string]string) []string {
	out := make([]string, 0, len(args))
	for _, a := range args {
		for k, v := range vars {
			a = strings.ReplaceAll(a, "$("+k+")", v)
		}
		if name, _, ok := strings.Cut(strings.TrimPrefix(a, "--"), "="); ok && strings.HasPrefix(a, "--") {
			if v, replace := flags[name]; replace {
				a = "--" + name + "=" + v
			}
		}
		out = append(out, a)
	}
	return out
}

// buildServer builds ../cmd/podsapi-server into the test's temporary directory.
func buildServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "podsapi-server")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	if err := childproc.Build(ctx, "", bin, "../cmd/podsapi-server"); err != nil {
		t.Fatal(err)
	}
	return bin
}

// startServer starts the server bin with args and returns its logs and a
// function that stops it with SIGINT and fails the test unless it exits
// cleanly.
func startServer(t *testing.T, ctx context.Context, bin string, args []string) (*processLogs, func()) {
	t.Helper()
	srv := exec.CommandContext(ctx, bin, args...)
	logs := startLogged(t, srv)
	return logs, func() {
		_ = srv.Process.Signal(os.Interrupt)
		if err := logs.wait(); err != nil {
			t.Errorf("server: %v, want a clean exit on SIGINT\n%s", err, logs.String())
		}
	}
}

// processLogs collects the stderr of a started process line by line.
type processLogs struct {
	mu      sync.Mutex
	lines   []string
	changed chan struct{}
	exited  chan struct{}
	err     error
}

// startLogged starts cmd with its stderr collected.
func startLogged(t *testing.T, cmd *exec.Cmd) *processLogs {
	t.Helper()
	r, w := io.Pipe()
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l := &processLogs{changed: make(chan struct{}), exited: make(chan struct{})}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			l.mu.Lock()
			l.lines = append(l.lines, sc.Text())
			close(l.changed)
			l.changed = make(chan struct{})
			l.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, r)
	}()
	go func() {
		err := cmd.Wait()
		w.Close()
		<-scanned
		l.err = err
		close(l.exited)
	}()
	return l
}

// waitFor waits until a line contains substr, and fails the test if the
// process exits first.
func (l *processLogs) waitFor(t *testing.T, substr string) {
	t.Helper()
	for {
		l.mu.Lock()
		changed := l.changed
		for _, line := range l.lines {
			if strings.Contains(line, substr) {
				l.mu.Unlock()
				return
			}
		}
		l.mu.Unlock()
		select {
		case <-changed:
		case <-l.exited:
			t.Fatalf("the server exited (%v) before logging %q:\n%s", l.err, substr, l.String())
		}
	}
}

// wait waits for the process to exit and returns its error.
func (l *processLogs) wait() error {
	<-l.exited
	return l.err
}

func (l *processLogs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}
