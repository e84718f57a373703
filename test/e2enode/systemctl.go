package e2enode

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Unit is the systemd unit the systemctl shim lists the kubelet as: upstream's
// tests look for a unit matching kubelet-\w+.
const Unit = "kubelet-e2enode.service"

// controlEnv names the control socket of the Node a systemctl shim talks to.
const controlEnv = "PODSAPI_E2E_NODE_CONTROL"

// controlTimeout bounds one systemctl call: a restart stops the kubelet
// (SIGTERM, SIGKILL after 20 s) and starts it again.
const controlTimeout = 2 * time.Minute

// maxRequestBytes bounds a request on the control socket.
const maxRequestBytes = 64 << 10

// IsSystemctl reports whether this process runs as the systemctl shim: this
// binary, called through the symbolic link named systemctl that Node puts on
// the test binary's PATH.
func IsSystemctl() bool { return filepath.Base(os.Args[0]) == "systemctl" }

// reply is the control socket's answer to a systemctl call.
type reply struct {
	Code   int    `json:"code"`
	Output string `json:"output"`
}

// Systemctl is the systemctl shim: it sends args to the Node named by the
// environment, writes its answer to out and returns the exit code.
func Systemctl(args []string, out io.Writer) int {
	path := os.Getenv(controlEnv)
	if path == "" {
		fmt.Fprintf(out, "systemctl (podsapi e2e node shim): %s is not set: run by a Node only\n", controlEnv)
		return 1
	}
	c, err := net.DialTimeout("unix", path, 10*time.Second)
	if err != nil {
		fmt.Fprintf(out, "systemctl (podsapi e2e node shim): %v\n", err)
		return 1
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(controlTimeout + 30*time.Second))
	if err := json.NewEncoder(c).Encode(args); err != nil {
		fmt.Fprintf(out, "systemctl (podsapi e2e node shim): %v\n", err)
		return 1
	}
	var r reply
	if err := json.NewDecoder(io.LimitReader(c, maxRequestBytes)).Decode(&r); err != nil {
		fmt.Fprintf(out, "systemctl (podsapi e2e node shim): no answer: %v\n", err)
		return 1
	}
	io.WriteString(out, r.Output)
	return r.Code
}

// unitControl is what the systemctl shim drives: the node's kubelet.
type unitControl interface {
	running() bool
	stop() error
	start() error
}

// control serves the systemctl shim's calls on a UNIX socket, one at a
// time.
type control struct {
	ln   net.Listener
	unit unitControl
	logf func(format string, args ...any)
	mu   sync.Mutex
	wg   sync.WaitGroup
}

func newControl(path string, unit unitControl, logf func(string, ...any)) (*control, error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	c := &control{ln: ln, unit: unit, logf: logf}
	c.wg.Go(c.serve)
	return c, nil
}

func (c *control) close() {
	c.ln.Close()
	c.wg.Wait()
}

func (c *control) serve() {
	for {
		conn, err := c.ln.Accept()
		if err != nil {
			return
		}
		c.wg.Go(func() {
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(controlTimeout))
			var args []string
			if err := json.NewDecoder(bufio.NewReader(io.LimitReader(conn, maxRequestBytes))).Decode(&args); err != nil {
				return
			}
			c.mu.Lock()
			r := c.do(args)
			c.mu.Unlock()
			if r.Code != 0 {
				c.logf("systemctl shim: systemctl %s: exit %d %s", strings.Join(args, " "), r.Code, strings.Join(strings.Fields(r.Output), " "))
			}
			_ = json.NewEncoder(conn).Encode(r)
		})
	}
}

// do carries out one systemctl call.
func (c *control) do(args []string) reply {
	var words []string
	runningOnly := false
	for _, a := range args {
		switch {
		case a == "--state=running":
			runningOnly = true
		case strings.HasPrefix(a, "-"):
			// Other options (--no-pager, --quiet...) change nothing here.
		default:
			words = append(words, a)
		}
	}
	if len(words) == 0 {
		return reply{1, "systemctl (podsapi e2e node shim): no command\n"}
	}
	verb, units := words[0], words[1:]
	if verb == "list-units" {
		return c.listUnits(runningOnly)
	}
	if len(units) != 1 || strings.TrimSuffix(units[0], ".service") != strings.TrimSuffix(Unit, ".service") {
		return reply{5, fmt.Sprintf("systemctl (podsapi e2e node shim): %s: only the unit %s is known\n", strings.Join(units, " "), Unit)}
	}
	var err error
	switch verb {
	case "reset-failed":
		// The kubelet is started by the harness: no start limit to reset.
	case "kill", "stop":
		err = c.unit.stop()
	case "restart", "start":
		if err = c.unit.stop(); err == nil {
			err = c.unit.start()
		}
	case "is-active":
		if !c.unit.running() {
			return reply{3, "inactive\n"}
		}
		return reply{0, "active\n"}
	default:
		return reply{1, fmt.Sprintf("systemctl (podsapi e2e node shim): %s is not supported: %s\n", verb, strings.Join(supported, ", "))}
	}
	if err != nil {
		return reply{1, fmt.Sprintf("systemctl %s %s: %v\n", verb, Unit, err)}
	}
	return reply{}
}

// supported are the verbs the shim carries out.
var supported = []string{"list-units", "reset-failed", "kill", "stop", "restart", "start", "is-active"}

func (c *control) listUnits(runningOnly bool) reply {
	active, sub := "active", "running"
	if !c.unit.running() {
		if runningOnly {
			return reply{0, "0 loaded units listed.\n"}
		}
		active, sub = "failed", "failed"
	}
	return reply{0, fmt.Sprintf("  UNIT                    LOAD   ACTIVE SUB     DESCRIPTION\n  %s loaded %s %s the kubelet of the podsapi e2e node harness\n\n1 loaded units listed.\n", Unit, active, sub)}
}

// writeShims writes the sudo and systemctl shims into dir: sudo runs its
// arguments (the harness runs as root); systemctl is a symbolic link to
// this binary (see IsSystemctl).
func writeShims(dir string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "sudo"), []byte("#!/bin/sh\n# sudo shim of the podsapi e2e node harness: everything runs as root.\nexec \"$@\"\n"), 0o755); err != nil {
		return err
	}
	return os.Symlink(exe, filepath.Join(dir, "systemctl"))
}
