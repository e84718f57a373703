package socket_test

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/podsapi/podsapi/socket"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestListenOptions gives the socket a mode and a group, and the directory
// Listen creates 0750 with the same group; an existing directory is left
// alone.
//
// As root the group is one no user has; as any other user, one of its own
// (podstest.SocketGroup).
func TestListenOptions(t *testing.T) {
	gid := podstest.SocketGroup(t)
	base := tempDir(t)
	before, _ := os.Stat(base)
	for _, path := range []string{filepath.Join(base, "new", "s.sock"), filepath.Join(base, "s.sock")} {
		l, err := socket.Listen(path, socket.WithMode(0o660), socket.WithGroup(gid))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		info, _ := os.Lstat(path)
		if info.Mode().Perm() != 0o660 || info.Sys().(*syscall.Stat_t).Gid != uint32(gid) {
			t.Errorf("%s: mode %v gid %d, want 0660 and %d", path, info.Mode().Perm(), info.Sys().(*syscall.Stat_t).Gid, gid)
		}
	}
	dir, _ := os.Stat(filepath.Join(base, "new"))
	if dir.Mode().Perm() != 0o750 || dir.Sys().(*syscall.Stat_t).Gid != uint32(gid) {
		t.Errorf("created directory: mode %v gid %d, want 0750 and %d", dir.Mode().Perm(), dir.Sys().(*syscall.Stat_t).Gid, gid)
	}
	after, _ := os.Stat(base)
	if after.Mode() != before.Mode() || after.Sys().(*syscall.Stat_t).Gid != before.Sys().(*syscall.Stat_t).Gid {
		t.Errorf("an existing directory was changed: %v -> %v", before.Mode(), after.Mode())
	}
}

// TestPeerCred reads the credentials of this process over a socket pair.
func TestPeerCred(t *testing.T) {
	path := filepath.Join(tempDir(t), "s.sock")
	l, err := socket.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cred, err := socket.PeerCred(s)
	if err != nil {
		t.Fatal(err)
	}
	if cred.PID != int32(os.Getpid()) || cred.UID != uint32(os.Geteuid()) || cred.GID != uint32(os.Getegid()) {
		t.Fatalf("PeerCred = %+v, want pid %d uid %d gid %d", cred, os.Getpid(), os.Geteuid(), os.Getegid())
	}
	if _, err := socket.PeerCred(nopConn{}); err == nil {
		t.Fatal("PeerCred of a non-socket succeeded")
	}
}

type nopConn struct{ net.Conn }
