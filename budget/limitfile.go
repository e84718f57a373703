// Package budget holds the memory a podsapi server may use: the Budget of
// the bytes it keeps on behalf of its clients (budget.go), and the Go
// runtime's memory settings for a node daemon (this file): the soft memory
// limit from the memory limit of the process's cgroup, so
// that the server under a container limit (the DaemonSet's 256Mi, the
// systemd unit's MemoryMax) collects garbage harder as it nears the limit
// instead of being killed by the kernel (the runtime does this for
// GOMAXPROCS and CPU limits, not for memory), and the collector's target
// (DefaultGCPercent).
package budget

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// CgroupFile is the memory limit of the process's cgroup (cgroup v2, as
// containers and systemd services see it), and CgroupV1File the same on a
// cgroup v1 host.
const (
	CgroupFile   = "/sys/fs/cgroup/memory.max"
	CgroupV1File = "/sys/fs/cgroup/memory/memory.limit_in_bytes"
)

// unlimited is the smallest value cgroup v1 uses for "no limit" (the
// largest page-aligned int64).
const unlimited = 1 << 62

// DefaultLimitFraction is the share of the cgroup limit the runtime may use
// before it collects garbage continuously: the rest is headroom for what the
// runtime does not count (stacks in flight, fragmentation, the kernel's
// page cache of the process).
const DefaultLimitFraction = 0.9

// SetLimit sets the runtime's memory limit to fraction of the limit read from
// the first of files that exists, unless the GOMEMLIMIT environment variable
// is set (the operator's choice wins) or there is no limit. It returns the
// limit it set, or 0.
func SetLimit(fraction float64, files ...string) (int64, error) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	var limit int64
	for _, file := range files {
		if _, err := os.Stat(file); err != nil {
			continue
		}
		var err error
		if limit, err = ReadLimit(file); err != nil {
			return 0, err
		}
		break
	}
	if limit <= 0 {
		return 0, nil
	}
	soft := int64(float64(limit) * fraction)
	debug.SetMemoryLimit(soft)
	return soft, nil
}

// ReadLimit returns the memory limit in file, in bytes: 0 for no limit ("max" in
// cgroup v2, a value of 2^62 or more in v1) or a missing file.
func ReadLimit(file string) (int64, error) {
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" || s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s: %q is not a memory limit", file, s)
	}
	if n >= unlimited {
		return 0, nil
	}
	return n, nil
}
