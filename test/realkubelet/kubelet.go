package realkubelet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// BinEnv names the environment variable holding the directory of the
// kubelet and fakecri binaries.
const BinEnv = "PODSAPI_KUBE_BIN"

// DefaultMaxPods is a kubelet's default maxPods.
const DefaultMaxPods = 110

// stopTimeout is how long Stop waits after SIGTERM before SIGKILL.
const stopTimeout = 20 * time.Second

// Options configures a Kubelet made by Start.
type Options struct {
	// BinDir holds the kubelet and fakecri binaries. Required.
	BinDir string
	// NodeName is the kubelet's node name (--hostname-override); a kubelet
	// serves a static pod as <name>-<NodeName>. Default "node-a".
	NodeName string
	// MaxPods is the kubelet's maxPods. Default DefaultMaxPods.
	MaxPods int
	// FileCheckFrequency is how often the kubelet rereads its static pod
	// directory (it also watches it with inotify). Default 1s.
	FileCheckFrequency time.Duration
	// Log receives the output of the kubelet and fakecri when not nil; it
	// is also kept in the files kubelet.log and fakecri.log of Dir.
	Log io.Writer
	// Node, when not nil, registers the kubelet with an API server as a
	// node; nil (the default) runs it standalone.
	Node *NodeOptions
	// FakeCRIArgs are more arguments of fakecri, such as --nri-socket
	// and --events-file. None by default.
	FakeCRIArgs []string
}

// NodeOptions registers a kubelet with an API server (as test/e2enode
// does): it then runs the pods the API server binds to its node as well as
// its static pods, and serves its API on an address the API server can
// reach through its node proxy, which refuses loopback addresses.
type NodeOptions struct {
	// Kubeconfig is the kubelet's kubeconfig file (--kubeconfig). Required.
	Kubeconfig string
	// IP is the address the kubelet serves its API and read-only port on,
	// and reports as the node's InternalIP (--node-ip). Required.
	IP string
	// Port is the kubelet's API port; 0 takes a free port.
	Port int
	// HealthzPort is the port of its /healthz on 127.0.0.1; 0 serves none.
	HealthzPort int
	// ConfigPath is the file its KubeletConfiguration is written to by
	// Start and read from at every start; the default is kubelet.yaml in
	// Dir. A test that rewrites the configuration (as upstream's node e2e
	// tests do) writes this file and restarts the kubelet.
	ConfigPath string
}

// Kubelet is a running kubelet and its fake runtime. Its fields are set by
// Start.
type Kubelet struct {
	// Dir holds everything the kubelet writes; Close removes it.
	Dir string
	// ManifestDir is its static pod directory (staticPodPath).
	ManifestDir string
	// Socket is its Pods API socket.
	Socket string
	// NodeName is its node name.
	NodeName string
	// ReadOnlyURL is the base URL of its read-only port on 127.0.0.1, or
	// on NodeOptions.IP for a registered node (/pods, /metrics), without a
	// trailing slash.
	ReadOnlyURL string

	opts    Options
	config  string
	rootDir string
	fakecri *process

	mu      sync.Mutex
	kubelet *process
}

// Start makes a directory, starts fakecri and the kubelet in it, and
// returns once both are started; the kubelet's socket answers later (see
// WaitSocket). Close stops them and removes the directory.
func Start(ctx context.Context, opts Options) (*Kubelet, error) {
	if opts.BinDir == "" {
		return nil, errors.New("realkubelet: Options.BinDir is required")
	}
	if opts.NodeName == "" {
		opts.NodeName = "node-a"
	}
	if opts.MaxPods <= 0 {
		opts.MaxPods = DefaultMaxPods
	}
	if opts.FileCheckFrequency <= 0 {
		opts.FileCheckFrequency = time.Second
	}
	for _, b := range []string{"kubelet", "fakecri"} {
		if _, err := os.Stat(filepath.Join(opts.BinDir, b)); err != nil {
			return nil, fmt.Errorf("realkubelet: %w (make kubelet-tools builds it)", err)
		}
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		return nil, fmt.Errorf("realkubelet: the kubelet is confined with unshare(1) (util-linux): %w", err)
	}
	// A short path: the sockets live under it.
	dir, err := os.MkdirTemp("", "kl")
	if err != nil {
		return nil, err
	}
	k := &Kubelet{
		Dir:         dir,
		ManifestDir: filepath.Join(dir, "manifests"),
		rootDir:     filepath.Join(dir, "root"),
		NodeName:    opts.NodeName,
		opts:        opts,
	}
	k.Socket = filepath.Join(k.rootDir, "pods-api", "pods-api.sock")
	for _, d := range []string{k.ManifestDir, k.rootDir, filepath.Join(dir, "logs"), filepath.Join(dir, "images"), filepath.Join(dir, "work"), filepath.Join(dir, "volume-plugins")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	ports, err := freePorts(2)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	host, config := "127.0.0.1", filepath.Join(dir, "kubelet.yaml")
	if n := opts.Node; n != nil {
		if n.Kubeconfig == "" || n.IP == "" {
			os.RemoveAll(dir)
			return nil, errors.New("realkubelet: NodeOptions.Kubeconfig and NodeOptions.IP are required")
		}
		host = n.IP
		if n.Port != 0 {
			ports[0] = n.Port
		}
		if n.ConfigPath != "" {
			config = n.ConfigPath
		}
	}
	k.ReadOnlyURL = "http://" + net.JoinHostPort(host, strconv.Itoa(ports[1]))
	k.config = config
	if err := os.WriteFile(k.config, []byte(k.configYAML(ports[0], ports[1])), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	criSocket := filepath.Join(dir, "cri.sock")
	k.fakecri, err = startProcess(ctx, filepath.Join(dir, "fakecri.log"), opts.Log, filepath.Join(dir, "work"), nil,
		filepath.Join(opts.BinDir, "fakecri"), append([]string{"--socket", criSocket, "--image-fs", filepath.Join(dir, "images")}, opts.FakeCRIArgs...)...)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := waitFile(ctx, criSocket, k.fakecri, 30*time.Second); err != nil {
		k.Close()
		return nil, fmt.Errorf("realkubelet: fakecri: %w", err)
	}
	if err := k.StartKubelet(ctx); err != nil {
		k.Close()
		return nil, err
	}
	return k, nil
}

// configYAML is the KubeletConfiguration of a standalone kubelet on the
// fake runtime that writes only under k.Dir.
func (k *Kubelet) configYAML(port, readOnlyPort int) string {
	d := k.Dir
	y := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: %[1]s/manifests
fileCheckFrequency: %[2]s
address: 127.0.0.1
port: %[3]d
readOnlyPort: %[4]d
healthzPort: 0
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
containerRuntimeEndpoint: unix://%[1]s/cri.sock
imageServiceEndpoint: unix://%[1]s/cri.sock
podLogsDir: %[1]s/logs
volumePluginDir: %[1]s/volume-plugins
maxPods: %[5]d
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
localStorageCapacityIsolation: false
protectKernelDefaults: false
serializeImagePulls: false
`, d, k.opts.FileCheckFrequency, port, readOnlyPort, k.opts.MaxPods)
	if n := k.opts.Node; n != nil {
		// A registered node serves on its IP. Its configuration travels
		// through /configz and back (upstream's node e2e tests rewrite it
		// from there), where an empty enforceNodeAllocatable comes back
		// defaulted to ["pods"], which a kubelet without cgroupsPerQOS
		// refuses: "none" survives the round trip.
		y = strings.Replace(y, "address: 127.0.0.1\n", "address: "+n.IP+"\n", 1)
		y = strings.Replace(y, "healthzPort: 0\n", fmt.Sprintf("healthzPort: %d\nhealthzBindAddress: 127.0.0.1\n", n.HealthzPort), 1)
		y = strings.Replace(y, "enforceNodeAllocatable: []\n", "enforceNodeAllocatable: [none]\n", 1)
	}
	return y
}

// confine is the script that confines the kubelet before it execs it: a
// private mount namespace (unshare --mount) in which /proc/sys and the
// cgroup mounts are read-only and /var/log, /var/lib and /run are empty
// tmpfs mounts (a kubelet serves its device plugin socket at the
// hard-coded /var/lib/kubelet/device-plugins), so that the kubelet's
// kernel settings, cgroups, sockets and logs never reach the host. The
// kernel settings a kubelet insists on writing (its container manager
// exits when it cannot) are copies in $SYSCTL_DIR, bound over the
// originals.
const confine = `set -e
mount --bind /proc/sys /proc/sys
mount -o remount,bind,ro /proc/sys
for s in vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops kernel/keys/root_maxkeys kernel/keys/root_maxbytes; do
	f="$SYSCTL_DIR/$(echo "$s" | tr / _)"
	cat "/proc/sys/$s" > "$f"
	mount --bind "$f" "/proc/sys/$s"
done
for m in $(awk '$3 == "cgroup" || $3 == "cgroup2" || $2 == "/sys/fs/cgroup" {print $2}' /proc/self/mounts); do
	mount -o remount,bind,ro "$m"
done
for d in /var/log /var/lib /run; do
	if [ -d "$d" ]; then mount -t tmpfs -o size=16m tmpfs "$d"; fi
done
exec "$@"
`

// StartKubelet starts the kubelet (after Start, or after StopKubelet). Its
// socket answers later.
func (k *Kubelet) StartKubelet(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.kubelet != nil {
		return errors.New("realkubelet: the kubelet is running")
	}
	// A socket left by a killed kubelet.
	_ = os.Remove(k.Socket)
	args := []string{"--mount", "--propagation", "private", "--", "sh", "-c", confine, "sh",
		filepath.Join(k.opts.BinDir, "kubelet"),
		"--config", k.config,
		"--root-dir", k.rootDir,
		"--cert-dir", filepath.Join(k.rootDir, "pki"),
		"--hostname-override", k.NodeName,
		"--v", "0",
	}
	if n := k.opts.Node; n != nil {
		args = append(args, "--kubeconfig", n.Kubeconfig, "--node-ip", n.IP)
	}
	sysctlDir := filepath.Join(k.Dir, "sysctl")
	if err := os.MkdirAll(sysctlDir, 0o755); err != nil {
		return err
	}
	p, err := startProcess(ctx, filepath.Join(k.Dir, "kubelet.log"), k.opts.Log, filepath.Join(k.Dir, "work"), []string{"SYSCTL_DIR=" + sysctlDir}, "unshare", args...)
	if err != nil {
		return err
	}
	k.kubelet = p
	return nil
}

// StopKubelet stops the kubelet by its PID (SIGTERM, then SIGKILL after
// 20 s) and waits until it has exited. The fake runtime, and the
// containers it holds, stay.
func (k *Kubelet) StopKubelet() error {
	k.mu.Lock()
	p := k.kubelet
	k.kubelet = nil
	k.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.stop()
}

// PID returns the process ID of the running kubelet, 0 when none is
// running. The confinement execs it, so it is the PID Start started.
func (k *Kubelet) PID() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.kubelet == nil {
		return 0
	}
	return k.kubelet.cmd.Process.Pid
}

// Exited returns a channel closed when the running kubelet has exited, and
// nil when none is running.
func (k *Kubelet) Exited() <-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.kubelet == nil {
		return nil
	}
	return k.kubelet.done
}

// Close stops the kubelet and fakecri and removes Dir.
func (k *Kubelet) Close() error {
	err := k.StopKubelet()
	if k.fakecri != nil {
		err = errors.Join(err, k.fakecri.stop())
	}
	return errors.Join(err, os.RemoveAll(k.Dir))
}

// LogTail returns the last n bytes of the kubelet's log.
func (k *Kubelet) LogTail(n int64) string {
	f, err := os.Open(filepath.Join(k.Dir, "kubelet.log"))
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, n))
	return string(b)
}

// Lifecycle returns k as a conformance.Lifecycle: Start starts the
// kubelet, Stop stops it.
func (k *Kubelet) Lifecycle() *Lifecycle { return &Lifecycle{k} }

// Lifecycle starts and stops the kubelet of a Kubelet, as the conformance
// suite's lifecycle cases do.
type Lifecycle struct{ k *Kubelet }

// Start starts the kubelet.
func (l *Lifecycle) Start(ctx context.Context) error { return l.k.StartKubelet(ctx) }

// Stop stops the kubelet and waits until it has exited.
func (l *Lifecycle) Stop(context.Context) error { return l.k.StopKubelet() }

// Exited returns a channel closed when the kubelet has exited.
func (l *Lifecycle) Exited() <-chan struct{} { return l.k.Exited() }

// process is a child process, stopped by its PID.
type process struct {
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error
}

func startProcess(_ context.Context, logPath string, tee io.Writer, workDir string, env []string, name string, args ...string) (*process, error) {
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	var out io.Writer = lf
	if tee != nil {
		out = io.MultiWriter(lf, tee)
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = workDir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{cmd: cmd, log: lf, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		lf.Close()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM to the process, waits for it, and kills it after
// stopTimeout.
func (p *process) stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within %s of SIGTERM: killed", p.cmd.Path, stopTimeout)
	}
}

// waitFile waits until path exists, p has exited, or timeout.
func waitFile(ctx context.Context, path string, p *process, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("exited before %s appeared: %v", path, p.err)
		case <-ctx.Done():
			return fmt.Errorf("%s did not appear within %s", path, timeout)
		case <-tick.C:
		}
	}
}

// WaitSocket waits until the kubelet's Pods API socket accepts
// connections, the kubelet exits, or timeout.
func (k *Kubelet) WaitSocket(ctx context.Context, timeout time.Duration) error {
	k.mu.Lock()
	p := k.kubelet
	k.mu.Unlock()
	if p == nil {
		return errors.New("realkubelet: the kubelet is not running")
	}
	if err := waitFile(ctx, k.Socket, p, timeout); err != nil {
		return fmt.Errorf("realkubelet: kubelet: %w\n%s", err, k.LogTail(4096))
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", k.Socket)
	if err != nil {
		return err
	}
	return c.Close()
}

// freePorts returns n loopback TCP ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// StaticName is the name a kubelet serves the static pod name under.
func (k *Kubelet) StaticName(name string) string {
	return strings.TrimSuffix(name, "-"+k.NodeName) + "-" + k.NodeName
}
