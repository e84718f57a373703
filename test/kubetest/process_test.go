package kubetest_test

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/podsapi/podsapi/test/kubetest"
)

// TestProcess starts processes with kubetest.StartProcess and waits for
// them with Await: one becomes ready and is stopped by SIGTERM, one ends
// before it is ready and Await says how, with the condition's last error.
func TestProcess(t *testing.T) {
	tests := []struct {
		name    string
		script  string
		wantErr []string // Substrings of Await's error; none: ready.
	}{
		{name: "ready", script: "echo ready; exec sleep 60"},
		{name: "ends first", script: "echo starting; exit 3", wantErr: []string{"exit status 3", "ended before it was ready", "not ready: starting"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := kubetest.StartProcess("sh", "/bin/sh", filepath.Join(t.TempDir(), "log"), "-c", tt.script)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Stop(t) })
			err = p.Await(func() error {
				if log := p.Log(); !strings.Contains(log, "ready") {
					return errors.New("not ready: " + strings.TrimSpace(log))
				}
				return nil
			})
			if tt.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				p.Stop(t)
				var exit *exec.ExitError
				if !errors.As(p.Err(), &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
					t.Fatalf("ended with %v, want killed by SIGTERM", p.Err())
				}
				return
			}
			if err == nil {
				t.Fatal("Await returned nil, want an error")
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Await: %q, want it to contain %q", err, want)
				}
			}
		})
	}
}
