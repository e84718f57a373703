// Package memlimit sets the Go runtime's soft memory limit from the memory
// limit of the process's cgroup, so that a node daemon under a container
// limit (the DaemonSet's 256Mi, the systemd unit's MemoryMax) collects
// garbage harder as it nears the limit instead of being killed by the
// kernel. The runtime does this for GOMAXPROCS and CPU limits, not for
// memory.
package memlimit

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
// containers and systemd services see it).
const CgroupFile = "/sys/fs/cgroup/memory.max"

// DefaultFraction is the share of the cgroup limit the runtime may use
// before it collects garbage continuously: the rest is headroom for what the
// runtime does not count (stacks in flight, fragmentation, the kernel's
// page cache of the process).
const DefaultFraction = 0.9

// Set sets the runtime's memory limit to fraction of the limit read from
// file, unless the GOMEMLIMIT environment variable is set (the operator's
// choice wins) or there is no limit. It returns the limit it set, or 0.
func Set(file string, fraction float64) (int64, error) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	limit, err := Read(file)
	if err != nil || limit <= 0 {
		return 0, err
	}
	soft := int64(float64(limit) * fraction)
	debug.SetMemoryLimit(soft)
	return soft, nil
}

// Read returns the memory limit in file, in bytes: 0 for "max" (no limit)
// or a missing file (no cgroup v2).
func Read(file string) (int64, error) {
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
	return n, nil
}
