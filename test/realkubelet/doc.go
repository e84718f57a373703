// Package realkubelet runs a real kubelet (k8s.io/kubernetes v1.37.2
// cmd/kubelet, unchanged, built by tools/kube) for the tests that judge one
// or read one: standalone (no --kubeconfig, no API server), on a static pod
// directory, over upstream's fake CRI runtime (tools/kube/fakecri), in a
// directory of its own; or, with NodeOptions, registered with an API server
// as a node (test/e2enode).
//
// A kubelet is written for a node it owns. Started here it is confined so
// that it leaves the host as it found it: it runs in a private mount
// namespace (unshare(1)) where /proc/sys and the cgroup mounts are
// read-only, the kernel settings it writes are copies, and /var/log,
// /var/lib and /run are empty tmpfs mounts, and in an empty working
// directory (with a container log path it cannot read, a kubelet deletes
// files in its working directory). Every path it writes is under the
// directory Start creates, which Close removes; it is stopped by its PID.
//
// The tests of this package run only when PODSAPI_KUBE_BIN names the
// directory holding the kubelet and fakecri binaries (make
// conformance-kubelet builds them and sets it); otherwise they are skipped.
package realkubelet
