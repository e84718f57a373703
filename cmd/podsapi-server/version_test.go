package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionStamped builds the command as make build does, with the
// version given to the linker, and runs --version.
func TestVersionStamped(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "podsapi-server")
	build := exec.Command("go", "build", "-ldflags", "-X github.com/podsapi/podsapi/internal/buildinfo.Version=v0.9.9-stamped", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "podsapi-server v0.9.9-stamped (go") {
		t.Errorf("podsapi-server --version: %v, %q; want podsapi-server v0.9.9-stamped (go...)", err, out)
	}
}

func TestVersionFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := Run(context.Background(), []string{"--version"}, &stdout, &stderr); err != nil {
		t.Fatalf("Run --version: %v\n%s", err, stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "podsapi-server ") || stderr.Len() != 0 {
		t.Errorf("--version printed %q, stderr %q", stdout.String(), stderr.String())
	}
}
