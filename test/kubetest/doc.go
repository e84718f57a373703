// Package kubetest runs a real Kubernetes control plane for the tests: an
// etcd (tools/kube/etcd, on etcd's embed package) and a kube-apiserver
// (k8s.io/kubernetes/cmd/kube-apiserver), both built from the module proxy
// at the versions tools/kube/go.mod pins, started on loopback ports with
// certificates and tokens generated for the test, and stopped by their
// process IDs when the test ends.
//
// The binaries are looked for in the directory named by the environment
// variable PODSAPI_KUBE_BIN, which `make kube-bin` fills and prints (it
// builds them once and caches them by the hash of tools/kube/go.sum). A test
// calling Start is skipped when the variable is unset, and fails when it
// names a directory without the binaries.
//
// A ControlPlane has no controller manager, scheduler or kubelet: pods are
// created with spec.nodeName set, stay Pending unless a test writes their
// status, and are deleted with a grace period of zero. The ServiceAccount
// admission plugin is off, so that pods are accepted in a namespace without
// its default service account.
//
// What the control plane is made of serves the other servers of a test
// too, in this module and in the integrations module's rig
// (integrations/harness), so that each is written once: a child process
// with its log file, its readiness wait and its stop (Process); the wait
// for a state the test does not drive (Eventually, within Timeout); a
// kubeconfig of one user for one or more servers (WriteKubeconfig); a
// serving certificate for loopback (ServingCert); and a TCP proxy that
// counts bytes and can be cut (Proxy).
package kubetest
