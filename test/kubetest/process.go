package kubetest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stopTimeout bounds a process's graceful stop; it is killed after it.
const stopTimeout = 30 * time.Second

// Process is a child process of a test (etcd, the API server, a server
// under test), its output appended to a log file. It never outlives the
// test binary (it is killed when the binary's thread that started it
// ends), and its starter stops it with Stop, at the latest in a
// t.Cleanup: where that cleanup stands among the test's others is the
// starter's choice.
type Process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error // Set before done is closed.
}

// StartProcess starts bin with args, its stdout and stderr appended to
// logPath; name names it in errors.
func StartProcess(name, bin, logPath string, args ...string) (*Process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // Never outlive the test.
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// PID returns the process's ID.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed when the process has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err returns how the process ended (nil for a zero exit status), once
// Done is closed; nil before.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// exited says whether the process has ended.
func (p *Process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends the process SIGTERM and waits for it to end, killing it by its
// PID after stopTimeout (an error of the test). It returns how long the
// process took to stop: 0 when it had ended already, so that a second Stop
// does nothing.
func (p *Process) Stop(t testing.TB) time.Duration {
	t.Helper()
	start := time.Now()
	if p.exited() {
		return 0
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("stop %s (pid %d): %v", p.name, p.cmd.Process.Pid, err)
	}
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		t.Errorf("%s (pid %d) did not stop within %v of SIGTERM: killed", p.name, p.cmd.Process.Pid, stopTimeout)
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return time.Since(start)
}

// Await calls cond every PollInterval until it returns nil, and returns
// nil; or an error that carries cond's last one when the process ends
// first or when Timeout passes: the way a test waits for the process to
// be ready.
func (p *Process) Await(cond func() error) error {
	err := poll(p.done, cond)
	switch {
	case err == nil:
		return nil
	case p.exited() && p.err != nil:
		return fmt.Errorf("%s (pid %d, %v): %w", p.name, p.PID(), p.err, err)
	default:
		return fmt.Errorf("%s (pid %d): %w", p.name, p.PID(), err)
	}
}

// Log returns what the process has written so far.
func (p *Process) Log() string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	return string(data)
}

// Tail returns the last 30 lines of the process's log, for failure
// messages.
func (p *Process) Tail() string {
	lines := strings.Split(strings.TrimRight(p.Log(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-30):], "\n")
}
