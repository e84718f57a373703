package podcgroup_test

import (
	"strings"
	"testing"

	"github.com/podsapi/podsapi/podcgroup"
)

const (
	uid  = "8dbc5a3c-7f4e-4b39-9e7c-2a1f0c6d9e11"
	usc  = "8dbc5a3c_7f4e_4b39_9e7c_2a1f0c6d9e11"
	cid  = "4f1e9b0c2d3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c"
	hash = "6a1c2b3d4e5f60718293a4b5c6d7e8f9" // a static pod's UID
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, cgroup string
		want         podcgroup.Pod
		ok           bool
	}{
		{"cgroupfs, v2 line, burstable", "0::/kubepods/burstable/pod" + uid + "/" + cid, podcgroup.Pod{uid, cid}, true},
		{"cgroupfs, path, besteffort", "/kubepods/besteffort/pod" + uid + "/" + cid, podcgroup.Pod{uid, cid}, true},
		{"cgroupfs, Guaranteed (no QoS level)", "/kubepods/pod" + uid + "/" + cid, podcgroup.Pod{uid, cid}, true},
		{"cgroupfs, v1 line", "4:memory:/kubepods/burstable/pod" + uid + "/" + cid, podcgroup.Pod{uid, cid}, true},
		{"cgroupfs, the pod's own cgroup", "/kubepods/burstable/pod" + uid, podcgroup.Pod{UID: uid}, true},
		{"cgroupfs, a static pod's UID", "/kubepods/burstable/pod" + hash + "/" + cid, podcgroup.Pod{hash, cid}, true},
		{"systemd, containerd", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + usc + ".slice/cri-containerd-" + cid + ".scope", podcgroup.Pod{uid, cid}, true},
		{"systemd, CRI-O", "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + usc + ".slice/crio-" + cid + ".scope", podcgroup.Pod{uid, cid}, true},
		{"systemd, CRI-O's conmon", "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + usc + ".slice/crio-conmon-" + cid + ".scope", podcgroup.Pod{UID: uid}, true},
		{"systemd, docker", "1:name=systemd:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + usc + ".slice/docker-" + cid + ".scope", podcgroup.Pod{uid, cid}, true},
		{"systemd, Guaranteed", "0::/kubepods.slice/kubepods-pod" + usc + ".slice/cri-containerd-" + cid + ".scope", podcgroup.Pod{uid, cid}, true},
		{"systemd, relative to another cgroup namespace", "0::/../../kubepods-besteffort-pod" + usc + ".slice/cri-containerd-" + cid + ".scope", podcgroup.Pod{uid, cid}, true},
		{"cgroupfs under a kind node's cgroup", "0::/docker/" + cid + "/kubepods/burstable/pod" + uid + "/" + cid, podcgroup.Pod{uid, cid}, true},
		{"a nested cgroup inside the container", "0::/kubepods/burstable/pod" + uid + "/" + cid + "/init.scope", podcgroup.Pod{uid, cid}, true},
		{"a whole v1 file", "12:pids:/user.slice\n4:memory:/kubepods/pod" + uid + "/" + cid + "\n1:name=systemd:/init.scope\n", podcgroup.Pod{uid, cid}, true},
		{"a hybrid file: the v2 line first", "4:memory:/kubepods/pod" + uid + "/" + cid + "\n0::/kubepods/pod" + hash + "/" + cid + "\n", podcgroup.Pod{hash, cid}, true},
		{"a process of the host", "0::/system.slice/containerd.service", podcgroup.Pod{}, false},
		{"the root of its own cgroup namespace", "0::/", podcgroup.Pod{}, false},
		{"a slice named like a pod that is not the kubelet's", "/user.slice/user-pod1000.slice", podcgroup.Pod{}, false},
		{"podman's cgroup", "/machine.slice/libpod-" + cid + ".scope", podcgroup.Pod{}, false},
		{"pod without a hex UID", "/kubepods/podcast/" + cid, podcgroup.Pod{}, false},
		{"not a cgroup", "hello", podcgroup.Pod{}, false},
		{"too long", "/kubepods/pod" + uid + "/" + strings.Repeat("a", podcgroup.MaxPathBytes), podcgroup.Pod{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := podcgroup.Parse(tc.cgroup)
			if got != tc.want || ok != tc.ok {
				t.Errorf("Parse(%q) = %+v, %v; want %+v, %v", tc.cgroup, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add("0::/kubepods.slice/kubepods-pod" + usc + ".slice/cri-containerd-" + cid + ".scope")
	f.Add("4:memory:/kubepods/pod" + uid + "/" + cid + "\n")
	f.Fuzz(func(t *testing.T, s string) {
		p, ok := podcgroup.Parse(s)
		if ok && (p.UID == "" || !strings.Contains(strings.ReplaceAll(s, "_", "-"), p.UID) || !strings.Contains(s, p.ContainerID)) {
			t.Fatalf("Parse(%q) = %+v: a UID or ID not in the input", s, p)
		}
	})
}
