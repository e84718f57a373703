package podcgroup_test

import (
	"strings"
	"testing"

	"github.com/podsapi/podsapi/podcgroup"
)

func TestFromRuntime(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name, in, want string
	}{
		{"systemd", "kubepods-besteffort-pod1234_5678.slice:cri-containerd:" + id,
			"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1234_5678.slice/cri-containerd-" + id + ".scope"},
		{"systemd guaranteed", "kubepods-pod1234.slice:crio:" + id, "/kubepods.slice/kubepods-pod1234.slice/crio-" + id + ".scope"},
		{"systemd without prefix", "system.slice::foo", "/system.slice/foo.scope"},
		{"systemd root slice", "-.slice:p:x", "/p-x.scope"},
		{"systemd sub slice", "kubepods.slice::kubepods-x.slice", "/kubepods.slice/kubepods-x.slice"},
		{"cgroupfs", "/kubepods/besteffort/pod1234/" + id, "/kubepods/besteffort/pod1234/" + id},
		{"cgroupfs relative", "kubepods/pod1234/" + id, "/kubepods/pod1234/" + id},
		{"empty", "", ""},
		{"bad slice", "kubepods--x.slice:p:x", ""},
		{"not a slice", "kubepods:p:x", ""},
		{"two colons only", "a:b", ""},
		{"newline", "/a\n0::/b", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := podcgroup.FromRuntime(tc.in); got != tc.want {
				t.Errorf("FromRuntime(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestFromRuntimeParses checks that what FromRuntime returns for a kubelet
// pod's container names the pod and container as Parse reads them.
func TestFromRuntimeParses(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, in := range []string{
		"kubepods-burstable-pod6f3c2b1a_0d4e_4f5a_9b8c_7d6e5f4a3b2c.slice:cri-containerd:" + id,
		"/kubepods/burstable/pod6f3c2b1a-0d4e-4f5a-9b8c-7d6e5f4a3b2c/" + id,
	} {
		p, ok := podcgroup.Parse("0::" + podcgroup.FromRuntime(in))
		if !ok || p.UID != "6f3c2b1a-0d4e-4f5a-9b8c-7d6e5f4a3b2c" || p.ContainerID != id {
			t.Errorf("Parse(FromRuntime(%q)) = %+v, %v", in, p, ok)
		}
	}
}

// FuzzFromRuntime checks that any cgroups path translates to "" or to an
// absolute path of one line, bounded, which Parse never fails on.
func FuzzFromRuntime(f *testing.F) {
	for _, s := range []string{
		"kubepods-besteffort-pod1234_5678.slice:cri-containerd:abc", "/kubepods/pod1/abc", "a:b:c", "-.slice::x",
		"kubepods.slice::kubepods-x.slice", "x.slice:p:", "::", "/../..", "kubepods-.slice:a:b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := podcgroup.FromRuntime(in)
		if out == "" {
			return
		}
		if out[0] != '/' || strings.ContainsAny(out, "\n\x00") || len(out) > 2*podcgroup.MaxPathBytes+64 {
			t.Fatalf("FromRuntime(%q) = %q", in, out)
		}
		podcgroup.Parse("0::" + out)
	})
}
