// Package e2enode runs upstream's node end-to-end tests of the Kubelet Pods
// API (k8s.io/kubernetes v1.37.2 test/e2e_node, "Kubelet Pods API", built
// unchanged by make e2e-node-bin from tools/kube) against a real node made
// here: an etcd and a kube-apiserver (test/kubetest) and a kubelet
// registered with it (test/realkubelet, upstream's fake CRI), and
// either the kubelet's own Pods API or podsapi-server on the socket the tests
// dial, /var/lib/kubelet/pods-api/pods-api.sock.
//
// Everything runs in namespaces the test creates and leaves: TestMain runs
// the test binary again under unshare(1) in a new network namespace, whose
// only interfaces are lo and node0 holding NodeIP (192.0.2.10, TEST-NET-1,
// RFC 5737): a dummy interface, or a veth pair with both ends in the
// namespace where the kernel has no dummy driver; no packet leaves it. It
// also runs in a private mount namespace where /var/lib is an empty tmpfs
// (the tests' socket path and the state files they remove are under
// /var/lib/kubelet, hard-coded). The
// kubelet serves on NodeIP because the API server's node proxy, through which
// the tests read the kubelet's /configz and /metrics, refuses loopback
// addresses; its /healthz is on 127.0.0.1:10248, where the tests look for it.
//
// The tests restart the kubelet through "sudo systemctl": Node puts shims on
// the test binary's PATH. sudo runs its arguments (everything runs as root);
// systemctl is this package's test binary again (see Systemctl), which asks
// the Node that started it, over a UNIX socket, to list its kubelet as the
// unit kubelet-e2enode.service, to stop it (kill, stop), to start it again
// (restart, start), or to do nothing (reset-failed). Before each restart the
// tests rewrite the kubelet's configuration file, kubelet-config in their
// working directory, from the kubelet's /configz: Node starts the kubelet on
// that file.
//
// The tests run only when PODSAPI_E2E_NODE_BIN names the directory of
// e2e_node.test, PODSAPI_KUBE_BIN that of kube-apiserver and etcd, and
// PODSAPI_KUBELET_BIN that of the kubelet and fakecri (make e2e-node builds
// and sets them), as root on Linux.
package e2enode
