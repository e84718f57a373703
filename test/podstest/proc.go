package podstest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// WriteHostProc writes a fake proc file system under dir, a --host-proc
// for FindPods by pid and caller: a <pid>/cgroup file of each process of
// cgroups, with its content. It returns dir.
func WriteHostProc(dir string, cgroups map[int]string) (string, error) {
	for pid, cgroup := range cgroups {
		d := filepath.Join(dir, strconv.Itoa(pid))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(d, "cgroup"), []byte(cgroup), 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// SystemdCgroup returns the line of /proc/PID/cgroup of a process of the
// container id of the burstable pod uid, under the systemd cgroup driver,
// cgroup v2 and containerd, without its newline.
func SystemdCgroup(uid types.UID, id string) string {
	return "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(string(uid), "-", "_") +
		".slice/cri-containerd-" + id + ".scope"
}

// SocketGroup returns a group the test may give a socket it listens on:
// 4243, a group no user has, when the test runs as root; otherwise one of
// the test user's supplementary groups other than its effective group (a
// real change of group), or its effective group when it has no other.
func SocketGroup(t testing.TB) int {
	t.Helper()
	if os.Geteuid() == 0 {
		return 4243
	}
	egid := os.Getegid()
	groups, err := os.Getgroups()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if g != egid {
			return g
		}
	}
	return egid
}

// NearDeadline returns a channel that receives when nine tenths of the time
// go test's -timeout leaves t have passed (never without a -timeout), and
// the function that stops its timer. A wait bounded by an event selects on
// it too, so that it fails with the test's own message rather than be
// killed, while a busy machine slows the test without failing it.
func NearDeadline(t *testing.T) (<-chan time.Time, func()) {
	at := Deadline(t)
	if at.IsZero() {
		return nil, func() {}
	}
	timer := time.NewTimer(time.Until(at))
	return timer.C, func() { timer.Stop() }
}

// Deadline returns the time at which nine tenths of the time go test's
// -timeout leaves t will have passed, or the zero time (no deadline)
// without a -timeout: the deadline of the test's raw connections, which
// a busy machine then slows without failing them.
func Deadline(t *testing.T) time.Time {
	deadline, ok := t.Deadline()
	if !ok {
		return time.Time{}
	}
	return time.Now().Add(time.Until(deadline) * 9 / 10)
}
