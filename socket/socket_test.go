package socket_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/podsapi/podsapi/socket"
)

// tempDir returns a short temporary directory, for the 108-byte limit of
// socket paths.
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestListenPermissions(t *testing.T) {
	path := filepath.Join(tempDir(t), "pods-api", "pods-api.sock")
	l, err := socket.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Type() != os.ModeSocket || info.Mode().Perm() != 0o600 {
		t.Errorf("socket mode = %v, want a socket with 0600", info.Mode())
	}
	dir, err := os.Stat(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if dir.Mode().Perm() != 0o750 {
		t.Errorf("created directory mode = %v, want 0750", dir.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("the socket directory holds %d entries, want only the socket", len(entries))
	}
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	conn.Close()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("socket not removed on close: %v", err)
	}
}

func TestListenExistingPath(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, path string) (cleanup func())
		wantErr string // empty: Listen succeeds
		kept    bool   // the existing file must still be there
	}{
		{
			name: "StaleSocket",
			prepare: func(t *testing.T, path string) func() {
				l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
				if err != nil {
					t.Fatal(err)
				}
				l.SetUnlinkOnClose(false)
				l.Close()
				return func() {}
			},
		},
		{
			name: "LiveSocket",
			prepare: func(t *testing.T, path string) func() {
				l, err := net.Listen("unix", path)
				if err != nil {
					t.Fatal(err)
				}
				return func() { l.Close() }
			},
			wantErr: "another server is answering",
			kept:    true,
		},
		{
			name: "RegularFile",
			prepare: func(t *testing.T, path string) func() {
				if err := os.WriteFile(path, []byte("precious"), 0o644); err != nil {
					t.Fatal(err)
				}
				return func() {}
			},
			wantErr: "not a socket",
			kept:    true,
		},
		{
			name: "Directory",
			prepare: func(t *testing.T, path string) func() {
				if err := os.Mkdir(path, 0o755); err != nil {
					t.Fatal(err)
				}
				return func() {}
			},
			wantErr: "not a socket",
			kept:    true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(tempDir(t), "s.sock")
			defer tt.prepare(t, path)()
			before, _ := os.Lstat(path)
			l, err := socket.Listen(path)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Listen: %v", err)
				}
				l.Close()
				return
			}
			if err == nil {
				l.Close()
				t.Fatalf("Listen succeeded, want an error containing %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %q does not contain %q", err, tt.wantErr)
			}
			if tt.name == "LiveSocket" && !errors.Is(err, socket.ErrInUse) {
				t.Errorf("error %v is not ErrInUse", err)
			}
			after, statErr := os.Lstat(path)
			if tt.kept && (statErr != nil || !os.SameFile(before, after)) {
				t.Fatalf("the existing %s was removed or replaced", tt.name)
			}
		})
	}
}
