package manifest

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// beforeOpen is called by readManifest between its checks of the path and
// the open. Tests set it to swap the file in that window.
var beforeOpen = func(path string) {}

// errDirectory is returned by readManifest for a directory, or a symbolic
// link to one: not a manifest file, and ignored without a warning.
var errDirectory = errors.New("is a directory")

// readManifest reads the manifest file at path, never blocking on it and
// never reading more than limit+1 bytes of it (no cap if limit is zero).
//
// A manifest must be a regular file, or a symbolic link to one. Anything
// else, such as a FIFO, a socket, a device or a file of the proc or sys
// pseudo file systems (which claim to be regular files of size zero but
// can be endless, like /proc/self/pagemap), is rejected with reason
// "not_regular" without being read; a device is not even opened, since
// opening one can have effects of its own. A directory gives errDirectory.
//
// The checks before opening only spare the open: the file is opened with
// O_NONBLOCK, so that a FIFO swapped in after them cannot block the open,
// and O_NOFOLLOW when it was no symbolic link, and the opened file is
// checked again with fstat before any read.
func readManifest(path string, limit int64) ([]byte, error) {
	info, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	flags := os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_CLOEXEC
	switch mode := info.Mode(); {
	case mode.IsRegular():
		flags |= syscall.O_NOFOLLOW
	case mode&fs.ModeSymlink != 0:
		target, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		if err := checkRegular(target); err != nil {
			return nil, err
		}
	default:
		if err := checkRegular(info); err != nil {
			return nil, err
		}
	}
	beforeOpen(path)
	f, err := os.OpenFile(path, flags, 0)
	if errors.Is(err, syscall.ELOOP) {
		// A symbolic link replaced the regular file since Lstat; its
		// event brings the next read.
		return nil, reject(reasonNotRegular, "replaced by a symbolic link while being opened")
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	info, err = f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkRegular(info); err != nil {
		return nil, err
	}
	if fsName, ok := pseudoFileSystem(f); ok {
		return nil, reject(reasonNotRegular, "a file of the %s pseudo file system, not a regular file", fsName)
	}
	if limit > 0 && info.Size() > limit {
		return nil, reject(reasonTooLarge, "file size %d bytes is over the limit of %d bytes", info.Size(), limit)
	}
	var r io.Reader = f
	if limit > 0 {
		r = io.LimitReader(f, limit+1)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if limit > 0 && int64(len(data)) > limit {
		return nil, reject(reasonTooLarge, "file is over the limit of %d bytes (it grew while being read)", limit)
	}
	return data, nil
}

// checkRegular returns nil for a regular file, errDirectory for a
// directory and a rejection for anything else.
func checkRegular(info fs.FileInfo) error {
	mode := info.Mode()
	switch {
	case mode.IsRegular():
		return nil
	case mode.IsDir():
		return errDirectory
	}
	return reject(reasonNotRegular, "a %s, not a regular file", fileKind(mode))
}

// fileKind names the type of a file that is not regular.
func fileKind(mode fs.FileMode) string {
	switch {
	case mode&fs.ModeNamedPipe != 0:
		return "FIFO"
	case mode&fs.ModeSocket != 0:
		return "socket"
	case mode&fs.ModeCharDevice != 0:
		return "character device"
	case mode&fs.ModeDevice != 0:
		return "block device"
	case mode&fs.ModeSymlink != 0:
		return "symbolic link"
	}
	return "special file (" + mode.Type().String() + ")"
}
