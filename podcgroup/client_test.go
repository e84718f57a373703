package podcgroup_test

import (
	"testing"

	"github.com/podsapi/podsapi/podcgroup"
)

func TestClient(t *testing.T) {
	for _, tc := range []struct {
		name, cgroup, want string
	}{
		{"pod, cgroup v2 systemd", "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1b6c3f2a_0000_4000_8000_000000000001.slice/cri-containerd-abc.scope\n", "pod/1b6c3f2a-0000-4000-8000-000000000001"},
		{"pod, cgroup v1", "4:memory:/kubepods/burstable/pod1b6c3f2a-0000-4000-8000-000000000002/abc\n1:name=systemd:/kubepods/x\n", "pod/1b6c3f2a-0000-4000-8000-000000000002"},
		{"systemd service", "0::/system.slice/cilium.service\n", "unit/cilium.service"},
		{"session scope", "0::/user.slice/user-0.slice/session-4.scope\n", "unit/session-4.scope"},
		{"v1 service", "12:pids:/system.slice/falco.service\n11:memory:/system.slice/falco.service\n", "unit/falco.service"},
		{"other cgroup", "0::/agents/tracer\n", "cgroup/agents/tracer"},
		{"root cgroup", "0::/\n", ""},
		{"empty", "", ""},
		{"garbage", "not a cgroup file", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := podcgroup.Client(tc.cgroup); got != tc.want {
				t.Fatalf("Client(%q) = %q, want %q", tc.cgroup, got, tc.want)
			}
		})
	}
}
