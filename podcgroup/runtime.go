package podcgroup

import (
	"path"
	"strings"
)

// FromRuntime returns the cgroup path that /proc/PID/cgroup shows (in the
// host's cgroup namespace) for a process of a container or sandbox, from
// the cgroups path the container runtime has in its OCI spec
// (linux.cgroupsPath, as NRI reports it): with the systemd driver,
// "slice:prefix:name" such as
//
//	kubepods-besteffort-pod<UID>.slice:cri-containerd:<ID>
//	→ /kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<UID>.slice/cri-containerd-<ID>.scope
//
// and with the cgroupfs driver, the path itself ("/kubepods/besteffort/pod<UID>/<ID>").
// It returns "" for a path it cannot translate, or longer than
// MaxPathBytes.
func FromRuntime(cgroupsPath string) string {
	if cgroupsPath == "" || len(cgroupsPath) > MaxPathBytes || strings.ContainsAny(cgroupsPath, "\n\x00") {
		return ""
	}
	if strings.HasPrefix(cgroupsPath, "/") {
		return path.Clean(cgroupsPath)
	}
	parts := strings.Split(cgroupsPath, ":")
	if len(parts) != 3 {
		// A relative cgroupfs path, as runc takes it: under the root.
		if strings.Contains(cgroupsPath, ":") {
			return ""
		}
		return path.Clean("/" + cgroupsPath)
	}
	slice, prefix, name := parts[0], parts[1], parts[2]
	dir, ok := expandSlice(slice)
	if !ok || name == "" || strings.Contains(name, "/") || strings.Contains(prefix, "/") {
		return ""
	}
	unit := name
	switch {
	case strings.HasSuffix(name, ".slice"):
		// The process runs in a slice of its own.
		sub, ok := expandSlice(name)
		if !ok {
			return ""
		}
		return sub
	case prefix != "":
		unit = prefix + "-" + name + ".scope"
	case !strings.HasSuffix(name, ".scope"):
		unit = name + ".scope"
	}
	return strings.TrimSuffix(dir, "/") + "/" + unit
}

// expandSlice returns the path of a systemd slice: each "-" of its name
// opens a level ("a-b.slice" is "/a.slice/a-b.slice"); "" and "-.slice"
// are the root.
func expandSlice(slice string) (string, bool) {
	if slice == "" || slice == "-.slice" {
		return "/", true
	}
	name, ok := strings.CutSuffix(slice, ".slice")
	if !ok || name == "" || strings.Contains(name, "/") {
		return "", false
	}
	var b strings.Builder
	prefix := ""
	for _, part := range strings.Split(name, "-") {
		if part == "" {
			return "", false
		}
		b.WriteString("/" + prefix + part + ".slice")
		prefix += part + "-"
	}
	return b.String(), true
}
