package e2enode

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// NodeIP is the node's address: the only address of the dummy interface in
// the network namespace the tests run in (TEST-NET-1, RFC 5737, never routed).
const NodeIP = "192.0.2.10"

// namespaceEnv marks the process that runs in the namespaces Reexec made.
const namespaceEnv = "PODSAPI_E2E_NODE_NAMESPACE"

// InNamespace reports whether this process runs in the namespaces Reexec
// made.
func InNamespace() bool { return os.Getenv(namespaceEnv) != "" }

// Reexec runs this binary again, with its arguments, in a new network
// namespace and a private mount namespace (unshare --net --mount), and
// returns its exit code: TestMain exits with it. The child sees
// InNamespace and calls SetupNamespace.
func Reexec() int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2enode:", err)
		return 1
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		fmt.Fprintln(os.Stderr, "e2enode: the node runs in namespaces made with unshare(1) (util-linux):", err)
		return 1
	}
	cmd := exec.Command("unshare", append([]string{"--net", "--mount", "--propagation", "private", "--", exe}, os.Args[1:]...)...)
	cmd.Env = append(os.Environ(), namespaceEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2enode: unshare:", err)
		return 1
	}
	return 0
}

// setupScript brings up lo and an interface node0 holding NodeIP: a dummy
// interface, or where the kernel has no dummy driver (as on the machines
// this was written on), one end of a veth pair whose other end is in the
// same namespace; and it mounts an empty tmpfs on /var/lib, holding an
// empty /var/lib/kubelet.
const setupScript = `set -e
ip link set lo up
if ip link add node0 type dummy 2>/dev/null; then
	echo "e2enode: node0 is a dummy interface"
else
	ip link add node0 type veth peer name node0-peer
	ip link set node0-peer up
	echo "e2enode: node0 is a veth interface (no dummy driver)"
fi
ip addr add "$NODE_IP/24" dev node0
ip link set node0 up
mount -t tmpfs -o size=64m,mode=0755 tmpfs /var/lib
mkdir -p /var/lib/kubelet
`

// SetupNamespace prepares the namespaces Reexec made: lo up, an interface
// node0 with NodeIP/24, and an empty tmpfs on /var/lib. It needs ip(8)
// (iproute2).
func SetupNamespace() error {
	if !InNamespace() {
		return errors.New("e2enode: SetupNamespace outside the namespaces of Reexec would change the host")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("e2enode: the node's network is made with ip(8) (iproute2): %w", err)
	}
	cmd := exec.Command("sh", "-c", setupScript)
	cmd.Env = append(os.Environ(), "NODE_IP="+NodeIP)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("e2enode: set up the namespaces: %v\n%s", err, out)
	}
	os.Stderr.Write(out)
	return nil
}
