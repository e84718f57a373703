package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// CommandLifecycle runs the implementation as a shell command (sh -c) in its
// own process group: Stop sends the group SIGTERM, then SIGKILL after
// KillTimeout.
type CommandLifecycle struct {
	// Command is run with sh -c.
	Command string
	// Stdout and Stderr receive the command's output; nil discards it.
	Stdout, Stderr io.Writer
	// KillTimeout is how long Stop waits after SIGTERM. Default 15s.
	KillTimeout time.Duration

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start starts the command.
func (l *CommandLifecycle) Start(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cmd != nil {
		return errors.New("already running")
	}
	cmd := exec.Command("sh", "-c", l.Command)
	cmd.Stdout, cmd.Stderr = l.Stdout, l.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %q: %w", l.Command, err)
	}
	l.cmd, l.done = cmd, make(chan struct{})
	go func() {
		err := cmd.Wait()
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
		close(l.done)
	}()
	return nil
}

// Exited returns a channel closed when the command has exited, and nil when
// it is not running.
func (l *CommandLifecycle) Exited() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done
}

// Stop sends SIGTERM to the command's process group and waits for it to
// exit, killing the group after KillTimeout.
func (l *CommandLifecycle) Stop(ctx context.Context) error {
	l.mu.Lock()
	cmd, done := l.cmd, l.done
	l.cmd = nil
	l.mu.Unlock()
	if cmd == nil {
		return nil
	}
	timeout := l.KillTimeout
	if timeout <= 0 {
		timeout = 15 * time.Second
	}
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
		return fmt.Errorf("%q did not exit within %s of SIGTERM: killed", l.Command, timeout)
	case <-ctx.Done():
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
		return ctx.Err()
	}
	// sh may have run the implementation as its child: wait for the whole
	// group to be gone, killing it after the timeout.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for syscall.Kill(-pgid, 0) == nil {
		select {
		case <-t.C:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			return fmt.Errorf("%q did not exit within %s of SIGTERM: killed", l.Command, timeout)
		case <-ctx.Done():
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}
