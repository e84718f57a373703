package stress

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The memory limit the stress server runs under: the DaemonSet's 256Mi, as
// a cgroup v2 of its own where the machine allows (root, a writable cgroup2
// with the memory controller), and always the soft limit the server derives
// from it (budget.DefaultLimitFraction of it), so that the memory budget is the
// one of the DaemonSet.
const (
	childMemoryMax  = 256 << 20
	childGoMemLimit = "GOMEMLIMIT=230MiB"
)

// cgroupRoot is where the cgroup v2 hierarchy is mounted, and cgroupV1Memory
// where a cgroup v1 host mounts its memory controller.
const (
	cgroupRoot     = "/sys/fs/cgroup"
	cgroupV1Memory = "/sys/fs/cgroup/memory"
)

// memoryLimit is how the stress server's memory is limited: the cgroup it
// is moved into, or none, and a note saying which.
type memoryLimit struct {
	dir  string // the cgroup, "" when none
	v1   bool   // dir is a cgroup v1 memory cgroup
	Note string
}

// newMemoryLimit creates a cgroup v2 with memory.max = childMemoryMax, or
// on a cgroup v1 host a memory cgroup with memory.limit_in_bytes =
// childMemoryMax, or says why it cannot (or should not: under the race
// detector).
func newMemoryLimit() *memoryLimit {
	if os.Geteuid() != 0 {
		return &memoryLimit{Note: "GOMEMLIMIT=230MiB only: not root, no cgroup created"}
	}
	if raceEnabled {
		return &memoryLimit{Note: "GOMEMLIMIT=230MiB only: built with the race detector, whose shadow memory the cgroup would count"}
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(cgroupRoot, &fs); err != nil || fs.Type != unix.CGROUP2_SUPER_MAGIC {
		return newMemoryLimitV1()
	}
	ctl, _ := os.ReadFile(filepath.Join(cgroupRoot, "cgroup.subtree_control"))
	if !strings.Contains(string(ctl), "memory") {
		if err := os.WriteFile(filepath.Join(cgroupRoot, "cgroup.subtree_control"), []byte("+memory"), 0); err != nil {
			return &memoryLimit{Note: fmt.Sprintf("GOMEMLIMIT=230MiB only: cannot enable the memory controller: %v", err)}
		}
	}
	dir := filepath.Join(cgroupRoot, "podsapi-stress-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return &memoryLimit{Note: fmt.Sprintf("GOMEMLIMIT=230MiB only: %v", err)}
	}
	if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte(strconv.Itoa(childMemoryMax)), 0); err != nil {
		os.Remove(dir)
		return &memoryLimit{Note: fmt.Sprintf("GOMEMLIMIT=230MiB only: %v", err)}
	}
	return &memoryLimit{dir: dir, Note: "cgroup v2 memory.max=256M and GOMEMLIMIT=230MiB"}
}

// newMemoryLimitV1 creates a cgroup v1 memory cgroup limited to
// childMemoryMax, or says why it cannot.
func newMemoryLimitV1() *memoryLimit {
	var fs unix.Statfs_t
	if err := unix.Statfs(cgroupV1Memory, &fs); err != nil || fs.Type != unix.CGROUP_SUPER_MAGIC {
		return &memoryLimit{Note: "GOMEMLIMIT=230MiB only: neither " + cgroupRoot + " (cgroup v2) nor " + cgroupV1Memory + " (cgroup v1) is a memory cgroup hierarchy"}
	}
	dir := filepath.Join(cgroupV1Memory, "podsapi-stress-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return &memoryLimit{Note: fmt.Sprintf("GOMEMLIMIT=230MiB only: %v", err)}
	}
	if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte(strconv.Itoa(childMemoryMax)), 0); err != nil {
		os.Remove(dir)
		return &memoryLimit{Note: fmt.Sprintf("GOMEMLIMIT=230MiB only: %v", err)}
	}
	return &memoryLimit{dir: dir, v1: true, Note: "cgroup v1 memory.limit_in_bytes=256M and GOMEMLIMIT=230MiB"}
}

// add moves the process pid into the cgroup, if there is one.
func (m *memoryLimit) add(pid int) error {
	if m.dir == "" {
		return nil
	}
	return os.WriteFile(filepath.Join(m.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
}

// oomKills returns how many times the kernel killed a process of the cgroup
// for memory, -1 without a cgroup.
func (m *memoryLimit) oomKills() int {
	if m.dir == "" {
		return -1
	}
	file := "memory.events"
	if m.v1 {
		file = "memory.oom_control" // "oom_kill N" since Linux 4.13
	}
	b, err := os.ReadFile(filepath.Join(m.dir, file))
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "oom_kill" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return -1
}

// remove removes the cgroup once its processes are gone.
func (m *memoryLimit) remove() {
	if m.dir != "" {
		os.Remove(m.dir)
	}
}
