package kubeletgrpc_test

import (
	"flag"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/podsapi/podsapi/source"
	"github.com/podsapi/podsapi/source/kubeletgrpc"
)

// newFromFlags runs the Registration's constructor on args.
func newFromFlags(t *testing.T, socket string, args ...string) error {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	mk := kubeletgrpc.Registration.Flags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	_, err := mk(source.Env{Socket: socket})
	return err
}

// staleSocket leaves a socket file at path that nobody answers on.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
}

// TestSourceSocketIsNotTheServedSocket: --source-socket reaching --socket,
// through symbolic links to the socket or to its directory, is refused
// whether the socket is there, stale or not created yet (issue 25: the
// server then watched itself, NOT_SERVING forever).
func TestSourceSocketIsNotTheServedSocket(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir, served string) (sourceSocket string)
		ok    bool
	}{
		{"same path", func(t *testing.T, dir, served string) string { return served }, false},
		{"unix URL of the same path", func(t *testing.T, dir, served string) string { return "unix://" + served }, false},
		{"link to the socket, not created yet", func(t *testing.T, dir, served string) string {
			return link(t, served, filepath.Join(dir, "link.sock"))
		}, false},
		{"link to a stale socket", func(t *testing.T, dir, served string) string {
			staleSocket(t, served)
			return link(t, served, filepath.Join(dir, "link.sock"))
		}, false},
		{"relative link to a stale socket", func(t *testing.T, dir, served string) string {
			staleSocket(t, served)
			return link(t, filepath.Join("srv", filepath.Base(served)), filepath.Join(dir, "link.sock"))
		}, false},
		{"link to the socket's directory", func(t *testing.T, dir, served string) string {
			return filepath.Join(link(t, filepath.Dir(served), filepath.Join(dir, "linkdir")), filepath.Base(served))
		}, false},
		{"another socket", func(t *testing.T, dir, served string) string {
			staleSocket(t, served)
			return filepath.Join(dir, "kubelet.sock")
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Dir(socketPath(t))
			if err := os.Mkdir(filepath.Join(dir, "srv"), 0o700); err != nil {
				t.Fatal(err)
			}
			served := filepath.Join(dir, "srv", "pods.sock")
			err := newFromFlags(t, served, "--source-socket", tt.setup(t, dir, served))
			switch {
			case tt.ok && err != nil:
				t.Fatalf("refused: %v", err)
			case !tt.ok && (err == nil || !strings.Contains(err.Error(), "serve on another path")):
				t.Fatalf("error %v, want the same socket refused", err)
			}
		})
	}
}

func link(t *testing.T, target, name string) string {
	t.Helper()
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
	return name
}
