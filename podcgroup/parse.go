// Package podcgroup tells which pod and container a process belongs to, from
// its cgroups: it parses the cgroup paths the kubelet and the container
// runtimes create, and reads /proc/PID/cgroup, bounded in size and time.
//
// Both cgroup drivers and both cgroup versions are understood:
//
//	/kubepods/burstable/pod<UID>/<container ID>                   (cgroupfs)
//	/kubepods/pod<UID>/<container ID>                             (cgroupfs, Guaranteed)
//	/kubepods.slice/kubepods-besteffort.slice/
//	    kubepods-besteffort-pod<UID, "-" as "_">.slice/
//	    cri-containerd-<container ID>.scope                       (systemd; also crio-, docker-, cri-dockerd-)
//
// as lines of /proc/PID/cgroup of cgroup v1 ("4:memory:/kubepods/...") or v2
// ("0::/kubepods.slice/..."), and relative to another cgroup namespace
// ("0::/../../kubepods-besteffort-pod....slice/..."): the pod is found by
// its component wherever it is in the path.
//
// The package is a leaf: the server and any client may use it.
package podcgroup

import (
	"strings"
)

// Pod is what a cgroup path says about a process of a pod.
type Pod struct {
	// UID is the pod's metadata.uid.
	UID string
	// ContainerID is the ID of the container the process runs in, as the
	// runtime names it (without "<runtime>://"), or "" for a process of the
	// pod's own cgroup. It may be the ID of the pod's sandbox (its pause
	// container), which no container status lists.
	ContainerID string
}

// MaxPathBytes bounds the cgroup paths Parse reads; longer ones are not a
// pod's.
const MaxPathBytes = 4096

// Parse returns the pod a cgroup names: a path ("/kubepods/..."), a line of
// /proc/PID/cgroup ("0::/kubepods/...", "4:memory:/kubepods/...") or a
// whole file of such lines, and false when none names a pod. Of several
// lines, the first that names a pod wins; the cgroup v2 line ("0::") is
// tried first.
func Parse(cgroup string) (Pod, bool) {
	if strings.HasPrefix(cgroup, "/") && !strings.Contains(cgroup, "\n") {
		return ParsePath(cgroup)
	}
	lines := strings.Split(strings.TrimRight(cgroup, "\n"), "\n")
	for _, v2 := range []bool{true, false} {
		for _, line := range lines {
			path, ok := linePath(line)
			if !ok || strings.HasPrefix(line, "0::") != v2 {
				continue
			}
			if p, ok := ParsePath(path); ok {
				return p, true
			}
		}
	}
	return Pod{}, false
}

// linePath returns the path of a line of /proc/PID/cgroup:
// "hierarchy-ID:controller-list:path".
func linePath(line string) (string, bool) {
	_, rest, ok := strings.Cut(line, ":")
	if !ok {
		return "", false
	}
	_, path, ok := strings.Cut(rest, ":")
	return path, ok && strings.HasPrefix(path, "/")
}

// ParsePath returns the pod a cgroup path names, and false when it names
// none: the first component that names a pod ("pod<UID>" of cgroupfs,
// "kubepods[-<QoS>]-pod<UID>.slice" of systemd), and the container the
// component after it names, if any.
func ParsePath(path string) (Pod, bool) {
	if len(path) > MaxPathBytes {
		return Pod{}, false
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, part := range parts {
		uid, ok := podUID(part)
		if !ok {
			continue
		}
		p := Pod{UID: uid}
		if i+1 < len(parts) {
			p.ContainerID = containerID(parts[i+1])
		}
		return p, true
	}
	return Pod{}, false
}

// podUID returns the UID a component of a pod's cgroup names.
func podUID(part string) (string, bool) {
	if slice, ok := strings.CutSuffix(part, ".slice"); ok {
		// systemd: kubepods-pod<UID>.slice or kubepods-<QoS>-pod<UID>.slice,
		// the UID's dashes turned into underscores (systemd's "-" is the
		// hierarchy's separator).
		i := strings.LastIndex(slice, "-pod")
		if i < 0 || !strings.HasPrefix(slice, "kubepods") {
			return "", false
		}
		uid := strings.ReplaceAll(slice[i+len("-pod"):], "_", "-")
		return uid, validUID(uid)
	}
	uid, ok := strings.CutPrefix(part, "pod")
	return uid, ok && validUID(uid)
}

// validUID reports whether uid looks like a pod UID: a UUID, or the hash
// the kubelet gives a static pod, of hex digits and dashes.
func validUID(uid string) bool {
	if uid == "" || len(uid) > 64 {
		return false
	}
	for _, c := range []byte(uid) {
		if !isHex(c) && c != '-' {
			return false
		}
	}
	return true
}

// containerID returns the container ID a component of a container's cgroup
// names: the component itself (cgroupfs), or <ID> of "<runtime>-<ID>.scope"
// (systemd), or "" when it names none (CRI-O's conmon, "crio-conmon-<ID>",
// is not the container).
func containerID(part string) string {
	if scope, ok := strings.CutSuffix(part, ".scope"); ok {
		if strings.HasPrefix(scope, "crio-conmon-") {
			return ""
		}
		i := strings.LastIndexByte(scope, '-')
		if i < 0 {
			return ""
		}
		part = scope[i+1:]
	}
	for _, c := range []byte(part) {
		if !isHex(c) {
			return ""
		}
	}
	return part
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }
