// Package socket creates the UNIX socket the Pods API is served on, with
// access limited by file permissions.
package socket

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// DefaultPath is the standard path of the Pods API socket.
const DefaultPath = "/var/lib/kubelet/pods-api/pods-api.sock"

// Mode is the permission of the socket file: read and write for its owner
// (root, in a normal deployment) only.
const Mode fs.FileMode = 0o600

// DirMode is the permission of the socket's directory when Listen creates it.
const DirMode fs.FileMode = 0o750

// probeTimeout bounds the check for a server still answering on a socket.
const probeTimeout = time.Second

// ErrInUse is returned by Listen when another server answers on the socket.
var ErrInUse = errors.New("another server is answering on the socket")

// MaxPathLen is the length in bytes of the longest path a UNIX socket can
// be bound to: the size of sun_path less its terminating NUL (107 on Linux).
const MaxPathLen = len(syscall.RawSockaddrUnix{}.Path) - 1

// ErrPathTooLong is returned by Listen for a path longer than MaxPathLen.
var ErrPathTooLong = fmt.Errorf("a UNIX socket path has at most %d bytes", MaxPathLen)

// Option configures Listen.
type Option func(*options)

type options struct {
	mode  fs.FileMode
	group int // -1: leave the group alone
}

// WithMode sets the permission of the socket file instead of Mode. Only the
// permission bits of mode are used.
func WithMode(mode fs.FileMode) Option {
	return func(o *options) { o.mode = mode.Perm() }
}

// WithGroup gives the socket file, and its directory when Listen creates it,
// the group gid, for deployments where agents run as non-root members of
// that group (give the socket a mode such as 0660 with WithMode). A negative
// gid leaves the groups alone, the default.
func WithGroup(gid int) Option {
	return func(o *options) { o.group = gid }
}

// Listen listens on the UNIX socket at path. It creates the socket's
// directory with DirMode when it is missing, and gives the socket Mode before
// it becomes visible at path, so that no other user can ever connect. A stale
// socket file (nobody answers on it) is replaced; a socket on which a server
// still answers is not taken over (ErrInUse), and a path that is not a socket
// is never removed. Closing the returned listener removes the socket file.
// A path longer than MaxPathLen is refused with ErrPathTooLong.
//
// Options change the socket's permission (WithMode) and group (WithGroup);
// a directory Listen creates gets DirMode and the same group, while an
// existing directory is left as it is.
func Listen(path string, opts ...Option) (net.Listener, error) {
	o := options{mode: Mode, group: -1}
	for _, opt := range opts {
		opt(&o)
	}
	if len(path) > MaxPathLen {
		return nil, fmt.Errorf("the socket path %s is %d bytes: %w", path, len(path), ErrPathTooLong)
	}
	dir := filepath.Dir(path)
	_, statErr := os.Stat(dir)
	created := errors.Is(statErr, fs.ErrNotExist)
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return nil, fmt.Errorf("create the socket directory: %w", err)
	}
	if created && o.group >= 0 {
		if err := os.Chown(dir, -1, o.group); err != nil {
			return nil, fmt.Errorf("give the socket directory the group %d: %w", o.group, err)
		}
		// The umask may have taken bits of DirMode away.
		if err := os.Chmod(dir, DirMode); err != nil {
			return nil, fmt.Errorf("set the mode of the socket directory: %w", err)
		}
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	// Create the socket in a private directory beside path, restrict it, then
	// rename it into place: at no moment does path name a socket with wider
	// permissions.
	tmp, err := os.MkdirTemp(dir, ".podsapi-")
	if err != nil {
		return nil, fmt.Errorf("create the socket: %w", err)
	}
	defer os.RemoveAll(tmp)
	tmpPath := filepath.Join(tmp, "s")
	l, err := listenIn(tmp, tmpPath)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	l.SetUnlinkOnClose(false)
	if o.group >= 0 {
		if err := os.Chown(tmpPath, -1, o.group); err != nil {
			l.Close()
			return nil, fmt.Errorf("give the socket the group %d: %w", o.group, err)
		}
	}
	if err := os.Chmod(tmpPath, o.mode); err != nil {
		l.Close()
		return nil, fmt.Errorf("restrict the socket: %w", err)
	}
	if err := os.Rename(tmpPath, path); err != nil {
		l.Close()
		return nil, fmt.Errorf("place the socket at %s: %w", path, err)
	}
	info, err := os.Lstat(path)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("stat the socket: %w", err)
	}
	return &listener{UnixListener: l, path: path, info: info}, nil
}

// listenIn binds a socket at tmpPath, in the private directory tmp. The
// private directory makes tmpPath longer than the path it is renamed to;
// when it is too long to bind, the socket is bound through the directory's
// descriptor (/proc/self/fd/N/s), as short whatever the directory.
func listenIn(tmp, tmpPath string) (*net.UnixListener, error) {
	if len(tmpPath) <= MaxPathLen {
		return net.ListenUnix("unix", &net.UnixAddr{Name: tmpPath, Net: "unix"})
	}
	d, err := os.Open(tmp)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	name := fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), filepath.Base(tmpPath))
	return net.ListenUnix("unix", &net.UnixAddr{Name: name, Net: "unix"})
}

// removeStale removes the socket at path if nobody answers on it.
func removeStale(path string) error {
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("check %s: %w", path, err)
	}
	if info.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s exists and is not a socket: refusing to replace it", path)
	}
	conn, err := net.DialTimeout("unix", path, probeTimeout)
	if err == nil {
		conn.Close()
		return fmt.Errorf("%s: %w", path, ErrInUse)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("check whether a server answers on %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the stale socket %s: %w", path, err)
	}
	return nil
}

// listener removes its socket file when closed, unless the file was replaced.
type listener struct {
	*net.UnixListener
	path string
	info fs.FileInfo
	once sync.Once
	err  error
}

// Close stops listening and removes the socket file.
func (l *listener) Close() error {
	l.once.Do(func() {
		l.err = l.UnixListener.Close()
		if info, err := os.Lstat(l.path); err == nil && os.SameFile(info, l.info) {
			if err := os.Remove(l.path); err != nil && l.err == nil {
				l.err = err
			}
		}
	})
	return l.err
}
