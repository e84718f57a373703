package docscheck

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMakeRun runs the README's first command, make run, on a socket of
// its own, and a second make run beside it, which must say which make
// variables give it a socket and metrics address of its own.
func TestMakeRun(t *testing.T) {
	if os.Getenv("PODSAPI_DOCS_CHECK") == "" {
		t.Skip("runs make run: make docs-check (PODSAPI_DOCS_CHECK=1)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "mr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "s.sock")
	startServer(t, root, "make", "--no-print-directory", "run", "SOCKET="+socket, "METRICS=")
	waitServing(t, filepath.Join(root, "bin", "podsapi-server"), socket)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	second := exec.CommandContext(ctx, "make", "--no-print-directory", "run", "SOCKET="+socket, "METRICS=")
	second.Dir = root
	out, err := second.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "make run SOCKET=") || !strings.Contains(string(out), "METRICS=") {
		t.Errorf("a second make run on the same socket: %v\n%s\nwant a failure that names SOCKET= and METRICS=", err, out)
	}
}

// TestMakeInstall runs the README's make install into a DESTDIR, and the
// installed commands' --version.
func TestMakeInstall(t *testing.T) {
	if os.Getenv("PODSAPI_DOCS_CHECK") == "" {
		t.Skip("runs make install: make docs-check (PODSAPI_DOCS_CHECK=1)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dest := t.TempDir()
	install := exec.Command("make", "--no-print-directory", "install", "PREFIX=/usr/local", "DESTDIR="+dest)
	install.Dir = root
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	for _, c := range []string{"podsapi-server", "podsapi-conformance", "podsctl"} {
		out, err := exec.Command(filepath.Join(dest, "usr/local/bin", c), "--version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), c+" ") || strings.Contains(string(out), "unknown") {
			t.Errorf("%s --version: %v, %q; want its name and the version make build stamps", c, err, out)
		}
	}
}
