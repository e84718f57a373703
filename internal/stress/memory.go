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
// from it (memlimit.DefaultFraction of it), so that the memory budget is the
// one of the DaemonSet.
const (
	childMemoryMax  = 256 << 20
	childGoMemLimit = "GOMEMLIMIT=230MiB"
)

// cgroupRoot is where the cgroup v2 hierarchy is mounted.
const cgroupRoot = "/sys/fs/cgroup"

// memoryLimit is how the stress server's memory is limited: the cgroup it
// is moved into, or none, and a note saying which.
type memoryLimit struct {
	dir  string // the cgroup, "" when none
	Note string
}

// newMemoryLimit creates a cgroup v2 with memory.max = childMemoryMax, or
// says why it cannot.
func newMemoryLimit() *memoryLimit {
	var fs unix.Statfs_t
	if err := unix.Statfs(cgroupRoot, &fs); err != nil || fs.Type != unix.CGROUP2_SUPER_MAGIC {
		return &memoryLimit{Note: "GOMEMLIMIT=230MiB only: " + cgroupRoot + " is not a cgroup v2 (cgroup v1 host or container)"}
	}
	if os.Geteuid() != 0 {
		return &memoryLimit{Note: "GOMEMLIMIT=230MiB only: not root, no cgroup created"}
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
	b, err := os.ReadFile(filepath.Join(m.dir, "memory.events"))
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
