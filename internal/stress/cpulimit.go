package stress

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// attackerCPU is the CPU limit of an attacking process, in thousandths of
// a CPU: the attacking agents of the scenarios run on the same two cores as
// the server and the victim, and unconfined they take the machine from
// both, which no server can be fair about. On a node, an agent of a
// DaemonSet runs under a CPU limit of its own, as the attackers do here
// where the machine allows: half a CPU, a generous limit for an agent.
const attackerCPU = 500

// cgroupV1CPU is where a cgroup v1 host mounts its cpu controller.
const cgroupV1CPU = "/sys/fs/cgroup/cpu"

// cpuLimit is a cpu cgroup that confines the processes moved into it to
// attackerCPU, or none, with a note saying which.
type cpuLimit struct {
	dir   string // the cgroup, "" when none
	root  string // the cgroup processes are moved back to
	Note  string
	quota int // the limit in thousandths of a CPU
}

// newCPULimit creates a cpu cgroup limited to millicores: a cgroup v2 with
// cpu.max where the machine has one with the cpu controller, else a cgroup
// v1 with cpu.cfs_quota_us, or says why it cannot.
func newCPULimit(millicores int) *cpuLimit {
	none := func(why string) *cpuLimit {
		return &cpuLimit{Note: "attacker not CPU-limited: " + why}
	}
	if os.Geteuid() != 0 {
		return none("not root")
	}
	name := "podsapi-stress-attacker-" + strconv.Itoa(os.Getpid())
	period := 100000
	var fs unix.Statfs_t
	if err := unix.Statfs(cgroupRoot, &fs); err == nil && fs.Type == unix.CGROUP2_SUPER_MAGIC {
		ctl, _ := os.ReadFile(filepath.Join(cgroupRoot, "cgroup.subtree_control"))
		if !strings.Contains(string(ctl), "cpu") {
			if err := os.WriteFile(filepath.Join(cgroupRoot, "cgroup.subtree_control"), []byte("+cpu"), 0); err != nil {
				return none(fmt.Sprintf("cannot enable the cpu controller: %v", err))
			}
		}
		own, err := ownCgroup("")
		if err != nil {
			return none(err.Error())
		}
		dir := filepath.Join(cgroupRoot, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return none(err.Error())
		}
		if err := os.WriteFile(filepath.Join(dir, "cpu.max"), fmt.Appendf(nil, "%d %d", millicores*period/1000, period), 0); err != nil {
			os.Remove(dir)
			return none(err.Error())
		}
		return &cpuLimit{dir: dir, root: filepath.Join(cgroupRoot, own), quota: millicores,
			Note: fmt.Sprintf("attacker CPU-limited to %dm (cgroup v2 cpu.max)", millicores)}
	}
	if err := unix.Statfs(cgroupV1CPU, &fs); err != nil || fs.Type != unix.CGROUP_SUPER_MAGIC {
		return none("neither " + cgroupRoot + " (cgroup v2) nor " + cgroupV1CPU + " (cgroup v1) is a cpu cgroup hierarchy")
	}
	own, err := ownCgroup("cpu")
	if err != nil {
		return none(err.Error())
	}
	dir := filepath.Join(cgroupV1CPU, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return none(err.Error())
	}
	for file, v := range map[string]int{"cpu.cfs_period_us": period, "cpu.cfs_quota_us": millicores * period / 1000} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(strconv.Itoa(v)), 0); err != nil {
			os.Remove(dir)
			return none(err.Error())
		}
	}
	return &cpuLimit{dir: dir, root: filepath.Join(cgroupV1CPU, own), quota: millicores,
		Note: fmt.Sprintf("attacker CPU-limited to %dm (cgroup v1 cpu.cfs_quota_us)", millicores)}
}

// ownCgroup returns this process's cgroup in the hierarchy of controller
// (cgroup v1), or its cgroup v2 when controller is "".
func ownCgroup(controller string) (string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if controller == "" && parts[0] == "0" && parts[1] == "" {
			return parts[2], nil
		}
		for _, c := range strings.Split(parts[1], ",") {
			if controller != "" && c == controller {
				return parts[2], nil
			}
		}
	}
	return "", fmt.Errorf("no %q line in /proc/self/cgroup", controller)
}

// add moves the process pid (all its threads) into the cgroup, if there is
// one; its children started from then on are in it too.
func (l *cpuLimit) add(pid int) error {
	if l.dir == "" {
		return nil
	}
	return os.WriteFile(filepath.Join(l.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
}

// release moves the process pid back to the cgroup this process was in.
func (l *cpuLimit) release(pid int) error {
	if l.dir == "" {
		return nil
	}
	return os.WriteFile(filepath.Join(l.root, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
}

// confineSelf moves this process into the cgroup, for an attack it runs
// itself (the processes it started before stay outside), and returns the
// function that moves it back.
func (l *cpuLimit) confineSelf() (func(), error) {
	if err := l.add(os.Getpid()); err != nil {
		return nil, err
	}
	return func() { _ = l.release(os.Getpid()) }, nil
}

// remove deletes the cgroup, moving this process out of it first.
func (l *cpuLimit) remove() {
	if l.dir == "" {
		return
	}
	_ = l.release(os.Getpid())
	_ = os.Remove(l.dir)
}
