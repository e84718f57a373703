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

// pathOfLen returns a path of exactly n bytes, a short name in a long
// directory, in a new temporary directory.
func pathOfLen(t *testing.T, n int) string {
	t.Helper()
	const name = "s.sock"
	dir := tempDir(t)
	sub := n - len(dir) - len(name) - 2
	if sub < 1 {
		t.Fatalf("the temporary directory %s is too long for a path of %d bytes", dir, n)
	}
	return filepath.Join(dir, strings.Repeat("d", sub), name)
}

// TestListenLongPaths: every path a UNIX socket can have is served, even
// those (92 to 107 bytes; issue 25) too long for the private directory
// Listen binds in; a longer one is refused with an error naming the limit.
func TestListenLongPaths(t *testing.T) {
	for _, n := range []int{92, 100, socket.MaxPathLen} {
		path := pathOfLen(t, n)
		l, err := socket.Listen(path)
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		conn, err := net.Dial("unix", path)
		if err != nil {
			t.Fatalf("%d bytes: dial: %v", n, err)
		}
		conn.Close()
		if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
			t.Errorf("%d bytes: the socket directory holds %d entries, want only the socket", n, len(entries))
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	path := pathOfLen(t, socket.MaxPathLen+1)
	_, err := socket.Listen(path)
	if !errors.Is(err, socket.ErrPathTooLong) || !strings.Contains(err.Error(), "at most 107 bytes") || strings.Contains(err.Error(), ".podsapi-") {
		t.Fatalf("Listen of a %d-byte path: %v, want ErrPathTooLong naming the limit and no temporary path", len(path), err)
	}
}
