package podcgroup_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/podsapi/podsapi/podcgroup"
)

// fakeProc writes a proc tree of the processes in files (PID to the content
// of its cgroup file) and returns its root.
func fakeProc(t *testing.T, files map[int]string) string {
	t.Helper()
	root := t.TempDir()
	for pid, content := range files {
		dir := filepath.Join(root, strconv.Itoa(pid))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestReadFakeProc(t *testing.T) {
	systemdV2 := "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + usc + ".slice/cri-containerd-" + cid + ".scope\n"
	cgroupfsV1 := "12:pids:/kubepods/burstable/pod" + uid + "/" + cid + "\n11:memory:/kubepods/burstable/pod" + uid + "/" + cid + "\n1:name=systemd:/kubepods/burstable/pod" + uid + "/" + cid + "\n"
	systemdV1 := "4:memory:/kubepods.slice/kubepods-pod" + usc + ".slice/crio-" + cid + ".scope\n"
	cgroupfsV2 := "0::/kubepods/besteffort/pod" + uid + "/" + cid + "\n"
	relative := "0::/../../kubepods-besteffort-pod" + usc + ".slice/cri-containerd-" + cid + ".scope\n"
	root := fakeProc(t, map[int]string{
		10: systemdV2, 11: cgroupfsV1, 12: systemdV1, 13: cgroupfsV2, 14: relative,
		20: "0::/system.slice/kubelet.service\n",
		21: "", // exited between open and read
		22: strings.Repeat("5:cpu:/user.slice\n", podcgroup.MaxFileBytes/18+1) + cgroupfsV2,
	})
	r := podcgroup.NewReader(root)
	want := podcgroup.Pod{UID: uid, ContainerID: cid}
	for _, tc := range []struct {
		name string
		pid  int
		want podcgroup.Pod
		err  error
	}{
		{"systemd, cgroup v2", 10, want, nil},
		{"cgroupfs, cgroup v1", 11, want, nil},
		{"systemd, cgroup v1", 12, want, nil},
		{"cgroupfs, cgroup v2", 13, want, nil},
		{"relative to another cgroup namespace", 14, want, nil},
		{"a process outside any pod", 20, podcgroup.Pod{}, podcgroup.ErrNotPod},
		{"a process that exited during the read", 21, podcgroup.Pod{}, podcgroup.ErrNoProcess},
		{"no such process", 30, podcgroup.Pod{}, podcgroup.ErrNoProcess},
		{"PID 0", 0, podcgroup.Pod{}, podcgroup.ErrNoProcess},
		{"a file past the size bound", 22, podcgroup.Pod{}, podcgroup.ErrNotPod},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.Read(t.Context(), tc.pid)
			if got != tc.want || !errors.Is(err, tc.err) {
				t.Errorf("Read(%d) = %+v, %v; want %+v, %v", tc.pid, got, err, tc.want, tc.err)
			}
		})
	}
}

// TestReadSelf reads the test process's own /proc/self/cgroup through the
// real /proc: whether the test runs in a pod or not, Read agrees with Parse.
func TestReadSelf(t *testing.T) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	want, inPod := podcgroup.Parse(string(b))
	got, err := podcgroup.NewReader("").Read(t.Context(), os.Getpid())
	switch {
	case inPod && (err != nil || got != want):
		t.Errorf("Read(self) = %+v, %v; want %+v", got, err, want)
	case !inPod && !errors.Is(err, podcgroup.ErrNotPod):
		t.Errorf("Read(self) = %+v, %v; want ErrNotPod for %q", got, err, b)
	}
	t.Logf("/proc/self/cgroup: %q: in a pod %v", b, inPod)
}

// TestReadBounded checks that a read the kernel holds up (here a FIFO no
// one writes) ends with ErrBusy at the timeout, and that such reads hold
// their slot, so that they stay bounded.
func TestReadBounded(t *testing.T) {
	root := fakeProc(t, map[int]string{2: "0::/kubepods/pod" + uid + "\n"})
	if err := os.Mkdir(filepath.Join(root, "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(root, "1", "cgroup")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	r := &podcgroup.Reader{Proc: root, Timeout: 10 * time.Millisecond, Concurrency: 1}
	if _, err := r.Read(t.Context(), 1); !errors.Is(err, podcgroup.ErrBusy) {
		t.Fatalf("Read of a held-up file: %v, want ErrBusy", err)
	}
	// The held-up read keeps the only slot.
	if _, err := r.Read(t.Context(), 2); !errors.Is(err, podcgroup.ErrBusy) {
		t.Fatalf("Read while the slot is held: %v, want ErrBusy", err)
	}
	// Release the held-up read: a writer opens and closes the FIFO.
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	long := &podcgroup.Reader{Proc: root}
	if p, err := long.Read(t.Context(), 2); err != nil || p.UID != uid {
		t.Fatalf("Read = %+v, %v", p, err)
	}
	// The slot comes back once the held-up read ends: wait for it with a
	// deadline far beyond any machine's delay.
	r.Timeout = time.Minute
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if p, err := r.Read(ctx, 2); err != nil || p.UID != uid {
		t.Fatalf("Read after the release = %+v, %v", p, err)
	}
}
