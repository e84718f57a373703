package deploy_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// unitDirectories are the directives by which systemd creates a directory
// before it sets up the sandbox, with the directory they are relative to
// (systemd.exec(5), "RuntimeDirectory=, StateDirectory=, ...").
var unitDirectories = map[string]string{
	"RuntimeDirectory":       "/run",
	"StateDirectory":         "/var/lib",
	"CacheDirectory":         "/var/cache",
	"LogsDirectory":          "/var/log",
	"ConfigurationDirectory": "/etc",
}

// TestSystemdUnitStartsOnABareMachine does what systemd does before
// ExecStart, in an empty directory standing for the root of a machine
// without a kubelet: it creates the unit's *Directory= directories, checks
// that every path the sandbox needs exists (a missing ReadWritePaths= fails
// the start with status 226/NAMESPACE) and that the socket's directory is
// writable under ProtectSystem=strict; then it runs ExecStart's real server
// with its paths inside that root and probes it.
func TestSystemdUnitStartsOnABareMachine(t *testing.T) {
	args, d := unitExecStart(t)
	if pre := d["ExecStartPre"]; len(pre) > 0 {
		t.Fatalf("ExecStartPre %q: this test does not run it yet", pre)
	}
	root, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)

	// systemd: the *Directory= directories, with their parents (0755).
	writable := []string{}
	for directive, base := range unitDirectories {
		mode := os.FileMode(0o755)
		if m := d[directive+"Mode"]; len(m) > 0 {
			v, err := strconv.ParseUint(m[len(m)-1], 8, 32)
			if err != nil {
				t.Fatalf("%sMode=%s: %v", directive, m, err)
			}
			mode = os.FileMode(v)
		}
		for _, v := range d[directive] {
			for _, rel := range strings.Fields(v) {
				dir := filepath.Join(base, rel)
				if err := os.MkdirAll(filepath.Join(root, filepath.Dir(dir)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Mkdir(filepath.Join(root, dir), mode); err != nil {
					t.Fatal(err)
				}
				if directive != "ConfigurationDirectory" { // read-only under ProtectSystem=strict
					writable = append(writable, dir)
				}
			}
		}
	}
	// systemd: the sandbox's paths must exist, unless prefixed with "-".
	for _, directive := range []string{"ReadWritePaths", "ReadOnlyPaths", "InaccessiblePaths", "ExecPaths", "NoExecPaths"} {
		for _, v := range d[directive] {
			for _, p := range strings.Fields(v) {
				optional := strings.HasPrefix(p, "-")
				p = strings.TrimLeft(p, "-+")
				if directive == "ReadWritePaths" {
					writable = append(writable, p)
				}
				if _, err := os.Stat(filepath.Join(root, p)); err != nil && !optional {
					t.Errorf("%s=%s does not exist on a bare machine: systemd fails the start (226/NAMESPACE)", directive, p)
				}
			}
		}
	}
	sock, _ := flagValue(args, "socket")
	if !slices.ContainsFunc(writable, func(w string) bool { return filepath.Dir(sock) == w || strings.HasPrefix(filepath.Dir(sock), w+"/") }) {
		t.Errorf("the socket's directory %s is not writable under ProtectSystem=strict (writable: %q)", filepath.Dir(sock), writable)
	}
	if t.Failed() {
		return
	}

	// ExecStart, its absolute paths inside root, no metrics port.
	bin := buildServer(t)
	var run []string
	for _, a := range args[1:] {
		if name, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "="); ok && filepath.IsAbs(v) {
			a = "--" + name + "=" + filepath.Join(root, v)
		}
		run = append(run, a)
	}
	run = expandArgs(run, nil, map[string]string{"metrics-address": ""})
	run = append(run, "--node-name=bare")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logs, stop := startServer(t, ctx, bin, run)
	defer stop()
	logs.waitFor(t, "pod sources synced")
	rootSock := filepath.Join(root, sock)
	if out, err := exec.CommandContext(ctx, bin, "probe", "--serving", "--socket="+rootSock).CombinedOutput(); err != nil {
		t.Errorf("probe --serving of the unit's server: %v\n%s", err, out)
	}
}

// TestSystemdAnalyzeVerify runs systemd-analyze verify on the unit, with
// ExecStart's binary replaced by a built server (verify checks that it is
// executable); any warning fails it. .ci/run installs systemd-analyze.
func TestSystemdAnalyzeVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (.ci/run installs it)")
	}
	unit, err := os.ReadFile("podsapi.service")
	if err != nil {
		t.Fatal(err)
	}
	bin := buildServer(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "podsapi.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/podsapi-server", bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, analyze, "verify", "--man=no", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
