package podcgroup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Defaults of a Reader.
const (
	// DefaultProc is where a Reader finds the processes: the proc file
	// system of the reader's PID namespace.
	DefaultProc = "/proc"
	// DefaultTimeout bounds one read of /proc/PID/cgroup, whose kernel
	// side takes the cgroup lock.
	DefaultTimeout = time.Second
	// DefaultConcurrency bounds the reads in flight at once, those past
	// their timeout included.
	DefaultConcurrency = 16
)

// MaxFileBytes bounds what a Reader reads of /proc/PID/cgroup: a few lines
// under cgroup v2, a dozen under v1.
const MaxFileBytes = 64 << 10

// Errors of Reader.Read.
var (
	// ErrNoProcess: no process has the PID, or it exited during the read.
	ErrNoProcess = errors.New("no such process")
	// ErrNotPod: the process runs in no pod's cgroup.
	ErrNotPod = errors.New("the process is in no pod's cgroup")
	// ErrBusy: too many reads are in flight, or the read did not end in
	// time.
	ErrBusy = errors.New("the cgroups of the process could not be read in time")
)

// Reader reads the cgroups of processes from a proc file system. The zero
// value reads /proc with the defaults. It is safe for concurrent use once
// its fields are set.
type Reader struct {
	// Proc is the proc file system's mount point, DefaultProc when empty:
	// a DaemonSet mounts the host's at /host/proc, or shares the host's PID
	// namespace (hostPID).
	Proc string
	// Timeout bounds one read; DefaultTimeout when 0.
	Timeout time.Duration
	// Concurrency bounds the reads in flight; DefaultConcurrency when 0.
	Concurrency int

	once sync.Once
	sem  chan struct{}
}

// NewReader returns a Reader of the proc file system at proc ("" for
// DefaultProc) with the default bounds.
func NewReader(proc string) *Reader {
	return &Reader{Proc: proc}
}

func (r *Reader) init() {
	if r.Proc == "" {
		r.Proc = DefaultProc
	}
	if r.Timeout <= 0 {
		r.Timeout = DefaultTimeout
	}
	if r.Concurrency <= 0 {
		r.Concurrency = DefaultConcurrency
	}
	r.sem = make(chan struct{}, r.Concurrency)
}

// Read returns the pod of the process pid, from <Proc>/<pid>/cgroup, read
// in at most Timeout (or ctx's deadline, if earlier). It returns
// ErrNoProcess for a PID no process has (also one that exits during the
// read), ErrNotPod for a process outside any pod, ErrBusy when the read
// could not be made in time, or another error when the file cannot be read
// (permissions).
func (r *Reader) Read(ctx context.Context, pid int) (Pod, error) {
	b, err := r.ReadFile(ctx, pid)
	if err != nil {
		return Pod{}, err
	}
	p, ok := Parse(b)
	if !ok {
		return Pod{}, fmt.Errorf("%w: PID %d", ErrNotPod, pid)
	}
	return p, nil
}

// ReadFile returns <Proc>/<pid>/cgroup, read in at most Timeout (or ctx's
// deadline, if earlier) and at most MaxFileBytes of it, with the errors of
// Read but ErrNotPod.
func (r *Reader) ReadFile(ctx context.Context, pid int) (string, error) {
	r.once.Do(r.init)
	if pid <= 0 {
		return "", fmt.Errorf("%w: PID %d", ErrNoProcess, pid)
	}
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		return "", ErrBusy
	}
	type result struct {
		b   []byte
		err error
	}
	// The read runs apart so that a read the kernel holds up cannot hold
	// the caller past the timeout; it keeps its slot until it ends, so
	// that such reads stay bounded.
	done := make(chan result, 1)
	go func() {
		defer func() { <-r.sem }()
		b, err := readFile(filepath.Join(r.Proc, strconv.Itoa(pid), "cgroup"))
		done <- result{b, err}
	}()
	var res result
	select {
	case res = <-done:
	case <-ctx.Done():
		return "", ErrBusy
	}
	switch {
	case errors.Is(res.err, fs.ErrNotExist) || errors.Is(res.err, syscall.ESRCH):
		return "", fmt.Errorf("%w: PID %d", ErrNoProcess, pid)
	case res.err != nil:
		return "", res.err
	case len(res.b) == 0:
		// The process exited between open and read: the kernel gives an
		// empty file, or none.
		return "", fmt.Errorf("%w: PID %d", ErrNoProcess, pid)
	}
	return string(res.b), nil
}

// readFile returns at most MaxFileBytes of the file at path.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxFileBytes))
}
