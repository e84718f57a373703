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

// process is a child process, its log file and its end.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error // Set before done is closed.
}

// startProcess starts bin with args, its output appended to logPath.
func startProcess(name, bin, logPath string, args ...string) (*process, error) {
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
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited says whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends the process SIGTERM and waits for it to end, killing it by its
// PID after stopTimeout. It returns how long the process took to stop.
func (p *process) stop(t testing.TB) time.Duration {
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

// tail returns the end of the process's log, for failure messages.
func (p *process) tail() string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-30):], "\n")
}
