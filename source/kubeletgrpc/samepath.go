package kubeletgrpc

import (
	"os"
	"path/filepath"
)

// maxLinks bounds the symbolic links resolve follows, as the kernel's
// MAXSYMLINKS does.
const maxLinks = 40

// resolve returns path with its symbolic links resolved as far as they
// exist: unlike filepath.EvalSymlinks, a link whose target does not exist
// (a socket not created yet, or removed) still resolves to that target, so
// that two paths naming the same socket are told the same before either
// socket is there.
func resolve(path string) string {
	path = filepath.Clean(path)
	for range maxLinks {
		target, err := os.Readlink(path)
		if err != nil {
			break // Not a link, or not there: the links end here.
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(path), target)
		}
		path = filepath.Clean(target)
	}
	dir, base := filepath.Split(path)
	if dir = filepath.Clean(dir); dir != path {
		dir = resolve(dir)
	}
	return filepath.Join(dir, base)
}

// samePath reports whether the socket paths a and b name the same file,
// through symbolic links, whether the file exists or not.
func samePath(a, b string) bool {
	if ra, rb := resolve(a), resolve(b); ra == rb {
		return true
	}
	ia, errA := os.Stat(a)
	ib, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(ia, ib)
}
