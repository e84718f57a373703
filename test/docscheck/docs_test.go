package docscheck

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// defaultSocket is the socket path the documentation writes, replaced with
// the temporary server's.
const defaultSocket = "/var/lib/kubelet/pods-api/pods-api.sock"

// blockTimeout bounds each block.
const blockTimeout = 3 * time.Minute

// skips are the blocks that do not run here, by file and first command
// line (a prefix of it), with the reason.
var skips = []struct {
	file, first, why string
	// maybe marks an entry that may match no block: those of a file
	// written on another branch, until the lead prunes them at merge.
	maybe bool
}{
	// file, first command, why, maybe
	{"README.md", "make run ", "make run serves until interrupted and make test is CI itself: TestMakeRun runs make run", false},
	{"README.md", "make image ", "builds both images (minutes of CPU) and needs a kind cluster: CI runs make image image-check", false},
	{"README.md", "make install PREFIX=/usr/local", "installs system-wide: TestMakeInstall installs into a DESTDIR", false},
	{"README.md", "make conformance ", "the whole suite, twice: CI runs make conformance", false},
	{"README.md", "bin/podsapi-conformance --endpoint unix:///run/my-impl/pods.sock", "the socket of another implementation", false},
	{"docs/api.md", "grpcurl -plaintext -unix -H 'x-kubernetes-fieldmask: status.phase' $S kubelet.pods.v1alpha1.Pods/WatchPods", "a watch streams until interrupted", false},
	{"docs/api.md", "make examples ", "needs node, npm and Debian packages it installs: CI runs make examples", false},
	{"docs/api.md", "make protodeps", "make examples runs these steps, with npm", false},
	{"docs/api.md", "sudo apt-get install", "installs Debian packages: make examples runs these steps", false},
	{"docs/benchmarks.md", "make bench ", "six minutes of both cores: never in a test", false},
	{"docs/conformance.md", "make build", "the whole suite: CI runs make conformance", false},
	{"docs/conformance.md", "podsapi-conformance --endpoint unix:///run/my-agent/pods.sock", "the socket of another implementation", false},
	{"docs/conformance.md", "podsapi-conformance --wire kubelet", "needs a real kubelet: make conformance-kubelet runs it", false},
	{"docs/kubelet.md", "go run ./cmd/podsapi-conformance --wire kubelet", "needs a real kubelet: make conformance-kubelet runs it", false},
	{"docs/operators.md", "kubectl ", "needs a cluster", true},
	{"docs/operators.md", "kind ", "needs a kind cluster", true},
	{"docs/operators.md", "ctr ", "needs a node with containerd", true},
	{"docs/operators.md", "make image", "builds and pushes images: CI runs make image image-check", true},
	{"docs/operators.md", "systemctl ", "needs systemd as init", true},
	{"docs/operators.md", "sudo ", "changes the system", true},
	{"docs/operators.md", "docker run ", "needs Docker and a server of another implementation: make image-check runs the suite from the image", false},
	{"docs/operators.md", "install -m 0755 bin/podsapi-server /usr/local/bin/", "installs system-wide and needs systemd as init: TestSystemdUnitStartsOnABareMachine and TestSystemdAnalyzeVerify (./deploy) check the unit", false},
	{"docs/benchmarks.md", "make bench-nodeview ", "a real API server, 50 podsapi-servers and 250 agents for minutes of both cores: never in a test", false},
	{"docs/benchmarks.md", "make kube-bin    # builds kube-apiserver and etcd once", "an hour of churn simulated against a real API server: make test-apiserver runs ./workload", false},
	{"docs/reliability.md", "make kube-bin   # once: kube-apiserver, etcd, kubectl", "the attacks against a real API server: make test-apiserver runs them", false},
	{"docs/reliability.md", "PODSAPI_KUBE_BIN=$(make -s kube-bin-dir) go test", "the door's attacks against a real API server, which a cold run has not built yet when docs-check runs: make test-apiserver runs them", false},
	{"docs/integrations.md", "make kube-bin && cd integrations &&", "builds kube-apiserver and the agents (minutes of both cores): CI runs make integrations", false},
	{"docs/kubeapi-door.md", "kubectl -n podsapi create secret tls", "needs a cluster: TestKubeAPIDoorAPIServer serves with such a certificate", false},
	{"docs/profile.md", "go run ./test/cmd/bench", "a benchmark run with profiles", false},
	{"docs/development.md", "cd tools/kube", "reads the build graphs of the Kubernetes binaries (a minute, every module of tools/kube): it prints a count, for the one who changes tools/kube", false},
	{"docs/development.md", "d=$(mktemp -d) && git clone", "a whole cold .ci/run, which is CI itself", false},
	{"docs/reliability.md", "make test ", "make test is CI itself; make fuzz and make stress run in CI", false},
	{"docs/reliability.md", "mkdir /sys/fs/cgroup/memory/plim", "needs a cgroup v1 host", false},
	{"docs/server.md", "kind load image-archive", "needs a kind cluster and make image's archive", false},
	{"docs/server.md", "go tool -modfile=tools/go.mod crane push", "pushes to a registry", false},
}

// block is a fenced block of a Markdown file.
type block struct {
	file, lang string
	line       int // of the opening fence
	text       string
}

// blocks returns the fenced blocks of file, indented ones included.
func blocks(t *testing.T, file string) []block {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []block
	var cur *block
	indent := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if strings.HasPrefix(trimmed, "```") {
			if cur == nil {
				cur = &block{file: file, lang: strings.TrimSpace(strings.TrimPrefix(trimmed, "```")), line: n}
				indent = line[:len(line)-len(trimmed)]
				continue
			}
			out = append(out, *cur)
			cur = nil
			continue
		}
		if cur != nil {
			cur.text += strings.TrimPrefix(line, indent) + "\n"
		}
	}
	return out
}

// firstCommand returns the first line of a shell block that is not a
// comment or empty.
func firstCommand(text string) string {
	for l := range strings.Lines(text) {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return strings.TrimPrefix(l, "$ ")
		}
	}
	return ""
}

// env is what the blocks run with.
type env struct {
	root, socket string
	environ      []string
	// writable are the directories a block may write to when the blocks
	// run confined (see confine); nil when they run as they are.
	writable []string
}

// setup builds the commands, starts a server on the example manifests and
// returns the environment of the blocks.
func setup(t *testing.T) env {
	if os.Getenv("PODSAPI_DOCS_CHECK") == "" {
		t.Skip("runs the documentation's commands: make docs-check (PODSAPI_DOCS_CHECK=1)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	build := exec.Command("make", "--no-print-directory", "build")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	for _, c := range []string{"podsapi-server", "podsapi-conformance", "podsctl"} {
		if err := os.Symlink(filepath.Join(root, "bin", c), filepath.Join(bin, c)); err != nil {
			t.Fatal(err)
		}
	}
	grpcurl := os.Getenv("PODSAPI_GRPCURL")
	if grpcurl == "" {
		grpcurl = filepath.Join(root, "bin", "grpcurl")
		b := exec.Command("make", "--no-print-directory", "grpcurl-bin")
		b.Dir = root
		if out, err := b.CombinedOutput(); err != nil {
			t.Fatalf("make grpcurl-bin: %v\n%s", err, out)
		}
	}
	if err := os.Symlink(grpcurl, filepath.Join(bin, "grpcurl")); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "dc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "s.sock")
	startServer(t, root, filepath.Join(root, "bin", "podsapi-server"), "--manifest-dir", "examples/manifests",
		"--node-name", "node-1", "--socket", socket, "--metrics-address", "")
	waitServing(t, filepath.Join(root, "bin", "podsapi-server"), socket)
	e := env{root: root, socket: socket}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "PODSAPI_SOCKET=") {
			e.environ = append(e.environ, kv)
		}
	}
	e.environ = append(e.environ, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "PODSAPI_SOCKET="+socket)
	e.confine(t, dir)
	return e
}

// confine makes the blocks run, as root, in a mount namespace of their own
// where every directory is read-only but the checkout, tmp (their TMPDIR,
// which also holds the server's socket) and the Go and user caches: a block
// that would install something or change the system (a `make install`, an
// `install` into /usr/local, a unit into /etc/systemd) fails with "Read-only
// file system" instead, whether or not it is listed in skips. A user other
// than root cannot write there anyway: its blocks run as they are.
func (e *env) confine(t *testing.T, tmp string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatalf("the blocks run as root only confined, with util-linux's unshare: %v", err)
	}
	e.writable = []string{e.root, tmp}
	for _, v := range []string{"GOCACHE", "GOMODCACHE"} {
		out, err := exec.Command("go", "env", v).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", v, err)
		}
		e.writable = append(e.writable, strings.TrimSpace(string(out)))
	}
	if cache, err := os.UserCacheDir(); err == nil {
		e.writable = append(e.writable, cache)
	}
	for _, d := range e.writable {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.environ = append(e.environ, "TMPDIR="+tmp)
}

// confined is the shell that sets up a block's mount namespace (see
// confine) and then runs the block, its $0.
const confined = `set -e
for d in "$@"; do mount --bind "$d" "$d"; done
mount -o remount,bind,ro /
cd "$PWD" # the working directory, on the bind mount rather than under it
exec bash -e -o pipefail -c "$0"`

// startServer starts a child in its own process group, stopped (the group)
// at the end of the test, and returns it.
func startServer(t *testing.T, dir, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-waited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-waited
			t.Errorf("%s did not stop within 30s", name)
		}
	})
	return cmd
}

// waitServing waits until the server on socket reports SERVING, with the
// server's own probe: polling a child process's readiness.
func waitServing(t *testing.T, server, socket string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if exec.Command(server, "probe", "--serving", "--socket", socket).Run() == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no server SERVING on %s within 2 minutes", socket)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// run runs script with bash in e and returns its combined output.
func (e env) run(script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), blockTimeout)
	defer cancel()
	script = strings.ReplaceAll(script, defaultSocket, e.socket)
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
	if e.writable != nil {
		cmd = exec.CommandContext(ctx, "unshare", append([]string{"--mount", "--propagation", "private", "--", "bash", "-c", confined, script}, e.writable...)...)
	}
	cmd.Dir, cmd.Env = e.root, e.environ
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// ages matches the ages of podsctl's tables ("261d", "(261d ago)").
var ages = regexp.MustCompile(`\b\d+(y|d|h|m|s)(\d+(d|h|m|s))?\b`)

// normalize returns out with ages replaced and the spaces of each line
// collapsed.
func normalize(out string) string {
	var b strings.Builder
	for l := range strings.Lines(out) {
		b.WriteString(strings.Join(strings.Fields(ages.ReplaceAllString(l, "<age>")), " ") + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// TestConfined checks that a block run as root cannot write outside the
// directories confine leaves writable, and can inside them.
func TestConfined(t *testing.T) {
	e := setup(t)
	if e.writable == nil {
		t.Skip("the blocks are confined only as root")
	}
	outside := filepath.Join("/usr/local/bin", fmt.Sprintf("podsapi-docscheck-%d", os.Getpid()))
	t.Cleanup(func() { os.Remove(outside) })
	for _, tc := range []struct {
		name, script string
		fails        bool
	}{
		{"InstallIntoUsrLocal", "install -m 0755 /dev/null " + outside, true},
		{"UnitIntoEtc", "touch /etc/podsapi-docscheck-unit", true},
		{"TempFile", `f=$(mktemp) && echo ok > "$f" && rm "$f"`, false},
		{"Checkout", "touch bin/.docscheck && rm bin/.docscheck", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := e.run(tc.script)
			switch {
			case tc.fails && (err == nil || !strings.Contains(out, "Read-only file system")):
				t.Errorf("%s: %v, want Read-only file system\n%s", tc.script, err, out)
			case !tc.fails && err != nil:
				t.Errorf("%s: %v\n%s", tc.script, err, out)
			}
		})
	}
	if _, err := os.Stat(outside); err == nil {
		t.Errorf("%s was written", outside)
	}
}

// TestDocs runs the shell blocks and console sessions of the README and
// docs/.
func TestDocs(t *testing.T) {
	e := setup(t)
	files, err := filepath.Glob(filepath.Join(e.root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join(e.root, "README.md")}, files...)
	used := make([]bool, len(skips))
	for _, f := range files {
		rel, _ := filepath.Rel(e.root, f)
		for _, b := range blocks(t, f) {
			if b.lang != "sh" && b.lang != "console" {
				continue
			}
			first := firstCommand(b.text)
			t.Run(fmt.Sprintf("%s:%d", rel, b.line), func(t *testing.T) {
				for i, s := range skips {
					if s.file == rel && strings.HasPrefix(first, s.first) {
						used[i] = true
						t.Skipf("%s: %s", first, s.why)
					}
				}
				if b.lang == "sh" {
					if out, err := e.run(b.text); err != nil {
						t.Fatalf("%s:%d: %v\n--- block\n%s--- output\n%s", rel, b.line, err, b.text, out)
					}
					return
				}
				for _, s := range sessions(b.text) {
					out, err := e.run(s.command)
					if err != nil {
						t.Errorf("%s:%d: $ %s: %v\n%s", rel, b.line, s.command, err, out)
						continue
					}
					if got, want := normalize(out), normalize(s.output); s.output != "" && got != want {
						t.Errorf("%s:%d: $ %s printed\n%s\nwant (ages as <age>, spaces collapsed)\n%s", rel, b.line, s.command, got, want)
					}
				}
			})
		}
	}
	for i, s := range skips {
		if !used[i] && !s.maybe {
			t.Errorf("skips: no block of %s starts with %q: remove it from the list", s.file, s.first)
		}
	}
}

// session is one "$ " command of a console block and its output.
type session struct{ command, output string }

// sessions returns the commands of a console block with their outputs. A
// command that prints nothing shown (such as one followed at once by the
// next) is run without its output being compared.
func sessions(text string) []session {
	var out []session
	for l := range strings.Lines(text) {
		if c, ok := strings.CutPrefix(l, "$ "); ok {
			out = append(out, session{command: strings.TrimSpace(c)})
			continue
		}
		if len(out) > 0 {
			out[len(out)-1].output += l
		}
	}
	return out
}
