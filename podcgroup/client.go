package podcgroup

import (
	"strings"
)

// Client returns the name a server tells its clients apart by, from the
// contents of a client process's /proc/PID/cgroup (or one cgroup path):
// "pod/<UID>" for a process of a pod, "unit/<name>" for a process of a
// systemd unit or scope outside any pod ("unit/podsctl-1.scope",
// "unit/cilium.service"), "cgroup/<path>" for a process in another cgroup
// but the root ("cgroup/agents/tracer"), and "" when the file names none of these (the root cgroup,
// or nothing readable): the caller then falls back to the process's UID.
// The cgroup v2 line ("0::") is read first.
func Client(cgroup string) string {
	if p, ok := Parse(cgroup); ok {
		return "pod/" + p.UID
	}
	path := clientPath(cgroup)
	if path == "" || path == "/" || len(path) > MaxPathBytes {
		return ""
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := len(parts) - 1; i >= 0; i-- {
		if part := parts[i]; strings.HasSuffix(part, ".service") || strings.HasSuffix(part, ".scope") {
			return "unit/" + part
		}
	}
	return "cgroup/" + strings.Trim(path, "/")
}

// clientPath returns the cgroup path of a file of /proc/PID/cgroup (or of a
// path): the cgroup v2 line's, else that of the first v1 line with one.
func clientPath(cgroup string) string {
	if strings.HasPrefix(cgroup, "/") && !strings.Contains(cgroup, "\n") {
		return cgroup
	}
	lines := strings.Split(strings.TrimRight(cgroup, "\n"), "\n")
	for _, line := range lines {
		if path, ok := linePath(line); ok && strings.HasPrefix(line, "0::") {
			return path
		}
	}
	for _, line := range lines {
		if path, ok := linePath(line); ok && path != "/" {
			return path
		}
	}
	return ""
}
