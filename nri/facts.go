package nri

import (
	"net/netip"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/podcgroup"
	"github.com/podsapi/podsapi/store"
)

// Bounds of the strings of a fact: an event whose strings are longer is
// refused (counted as invalid), never truncated.
const (
	// maxIDLen bounds sandbox and container IDs (64 hex digits in
	// containerd and CRI-O).
	maxIDLen = 256
	// maxNameLen bounds pod and container names (a DNS subdomain, 253;
	// a DNS label for namespaces and container names).
	maxNameLen = 253
	// maxUIDLen bounds pod UIDs (a UUID, or the hash of a static pod).
	maxUIDLen = 64
	// maxIPs bounds the IPs of a pod (one per family in Kubernetes).
	maxIPs = 8
)

// podOf returns the facts of a sandbox, and false when they are not valid:
// an ID, name or UID missing or too long. The IPs that do not parse are
// left out.
func podOf(p *api.PodSandbox) (store.RuntimePod, bool) {
	if !validString(p.GetId(), maxIDLen, true) || !validString(p.GetUid(), maxUIDLen, true) ||
		!validString(p.GetName(), maxNameLen, true) || !validString(p.GetNamespace(), maxNameLen, false) {
		return store.RuntimePod{}, false
	}
	rp := store.RuntimePod{
		SandboxID: p.GetId(),
		UID:       types.UID(p.GetUid()),
		Namespace: p.GetNamespace(),
		Name:      p.GetName(),
		Cgroup:    podcgroup.FromRuntime(p.GetLinux().GetCgroupsPath()),
	}
	for _, s := range p.GetIps() {
		if len(rp.IPs) == maxIPs || len(s) > 64 {
			break
		}
		if ip, err := netip.ParseAddr(s); err == nil {
			rp.IPs = append(rp.IPs, ip.Unmap().WithZone(""))
		}
	}
	return rp, true
}

// containerOf returns the facts of a container, and false when they are
// not valid.
func containerOf(c *api.Container) (store.RuntimeContainer, bool) {
	if !validString(c.GetId(), maxIDLen, true) || !validString(c.GetPodSandboxId(), maxIDLen, true) ||
		!validString(c.GetName(), maxNameLen, false) {
		return store.RuntimeContainer{}, false
	}
	return store.RuntimeContainer{
		ID:        c.GetId(),
		SandboxID: c.GetPodSandboxId(),
		Name:      c.GetName(),
		PID:       c.GetPid(),
		Cgroup:    podcgroup.FromRuntime(c.GetLinux().GetCgroupsPath()),
	}, true
}

// validString reports whether s is at most max bytes of printable ASCII,
// and not empty when required.
func validString(s string, max int, required bool) bool {
	if len(s) > max || required && s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}
