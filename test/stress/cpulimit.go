package stress

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/podsapi/podsapi/test/childproc"
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

// cpuMeter measures the CPU the server and the attacker spend during an
// attack, in cores: what says whether the machine was saturated.
type cpuMeter struct {
	c        *child
	attacker func() time.Duration
	start    time.Time
	server0  float64
	attack0  time.Duration
}

// meterCPU starts measuring the server of c and the attacker, whose CPU
// time attacker returns (selfCPU for an attack of this process).
func meterCPU(c *child, attacker func() time.Duration) *cpuMeter {
	m := &cpuMeter{c: c, attacker: attacker, start: time.Now(), attack0: attacker()}
	m.server0, _ = c.metric("process_cpu_seconds_total")
	return m
}

// row reports the cores the server and the attacker used since meterCPU.
func (m *cpuMeter) row(rep *Report, scenario string) {
	elapsed := max(time.Since(m.start).Seconds(), 1e-3)
	server, err := m.c.metric("process_cpu_seconds_total")
	value := fmt.Sprintf("%.2f / %.2f cores", (server-m.server0)/elapsed, (m.attacker()-m.attack0).Seconds()/elapsed)
	if err != nil {
		value = fmt.Sprintf("server unknown (%v) / %.2f cores", err, (m.attacker()-m.attack0).Seconds()/elapsed)
	}
	rep.add(scenario, "server / attacker CPU during the attack", true, value, "reported")
}

// selfCPU returns the CPU time this process has used.
func selfCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processCPU returns a function that returns the CPU time the process pid
// has used (0 once it is gone).
func processCPU(pid int) func() time.Duration {
	return func() time.Duration {
		d, _ := childproc.CPU(pid)
		return d
	}
}
