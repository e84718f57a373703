package childproc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// RoleEnv is the environment variable that carries a child's role.
const RoleEnv = "PODSAPI_CHILD_ROLE"

// killWait bounds the wait for the exit of a killed child.
const killWait = 10 * time.Second

// Role returns the role this process was started in by Start, or "" when it
// is not such a child.
func Role() string { return os.Getenv(RoleEnv) }

// MaxLineBytes bounds a line of a child's stdout: a child's result, one
// JSON line, may carry the latencies of every call it made. A longer line
// and what follows it are discarded.
const MaxLineBytes = 16 << 20

// Spec describes a child.
type Spec struct {
	// Role is the role the child finds with Role; it must not be empty.
	Role string
	// Args are the child's arguments (without the program name).
	Args []string
	// Env is added to this process's environment.
	Env []string
	// Stderr receives the child's stderr. When nil, it is kept, and the
	// errors of Next, Expect and Wait end with it.
	Stderr io.Writer
}

// Process is a running child. Its methods may be called from one goroutine
// at a time, except Kill, which may be called at any time.
type Process struct {
	role    string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stderr  *buffer // nil when Spec.Stderr is set
	exited  chan struct{}
	exitErr error // how the child exited, once exited is closed

	// The child's stdout lines not read yet. They are read from the pipe
	// as they come, so that a child never blocks on its stdout.
	mu      sync.Mutex
	lines   []string
	eof     bool          // stdout is closed
	discard bool          // Wait or Kill was called: lines are no longer kept
	more    chan struct{} // a line or the end of stdout, for Next
}

// Start starts os.Executable() in spec.Role with its stdin and stdout
// connected to the returned Process.
func Start(spec Spec) (*Process, error) {
	if spec.Role == "" {
		return nil, errors.New("childproc: a child needs a role")
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	p := &Process{role: spec.Role, exited: make(chan struct{}), more: make(chan struct{}, 1)}
	p.cmd = exec.Command(exe, spec.Args...)
	p.cmd.Env = append(append(os.Environ(), RoleEnv+"="+spec.Role), spec.Env...)
	p.cmd.Stderr = spec.Stderr
	if spec.Stderr == nil {
		p.stderr = &buffer{}
		p.cmd.Stderr = p.stderr
	}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Role, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, MaxLineBytes)
		for sc.Scan() {
			p.mu.Lock()
			if !p.discard {
				p.lines = append(p.lines, sc.Text())
			}
			p.mu.Unlock()
			p.signal()
		}
		_, _ = io.Copy(io.Discard, out) // a line beyond the scanner's limit
		p.mu.Lock()
		p.eof = true
		p.mu.Unlock()
		p.signal()
		p.exitErr = p.cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// signal wakes Next.
func (p *Process) signal() {
	select {
	case p.more <- struct{}{}:
	default:
	}
}

// Pid returns the child's process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stdin returns the child's stdin.
func (p *Process) Stdin() io.Writer { return p.stdin }

// CloseStdin closes the child's stdin.
func (p *Process) CloseStdin() error { return p.stdin.Close() }

// Signal sends sig to the child.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Exited is closed when the child has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Next returns the next line of the child's stdout. It fails when the child
// exits first, or when ctx ends.
func (p *Process) Next(ctx context.Context) (string, error) {
	for {
		p.mu.Lock()
		if len(p.lines) > 0 {
			line := p.lines[0]
			p.lines = p.lines[1:]
			p.mu.Unlock()
			return line, nil
		}
		eof := p.eof
		p.mu.Unlock()
		if eof {
			<-p.exited
			return "", p.errorf("exited (%v) before it said anything more", p.exitErr)
		}
		select {
		case <-p.more:
		case <-ctx.Done():
			return "", p.errorf("said nothing: %w", context.Cause(ctx))
		}
	}
}

// Expect returns the next line of the child's stdout, which must start with
// prefix.
func (p *Process) Expect(ctx context.Context, prefix string) (string, error) {
	line, err := p.Next(ctx)
	if err != nil {
		return "", fmt.Errorf("waiting for %q: %w", prefix, err)
	}
	if !strings.HasPrefix(line, prefix) {
		return "", p.errorf("said %q, want %q", line, prefix)
	}
	return line, nil
}

// Wait discards what the child still writes on stdout and waits at most
// timeout for it to exit, then kills it. It returns nil when the child
// exited with status 0 within timeout.
func (p *Process) Wait(timeout time.Duration) error {
	p.drain()
	select {
	case <-p.exited:
		if p.exitErr != nil {
			return p.errorf("exited with %v", p.exitErr)
		}
		return nil
	case <-time.After(timeout):
		p.Kill()
		return p.errorf("did not exit within %v", timeout)
	}
}

// Kill ends the child at once and waits for its exit, at most 10 s. It is a
// no-op once the child has exited.
func (p *Process) Kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	p.drain()
	select {
	case <-p.exited:
	case <-time.After(killWait):
	}
}

// drain discards the child's unread stdout lines and those to come.
func (p *Process) drain() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.discard, p.lines = true, nil
}

// errorf returns an error about the child, ending with its stderr when it
// is kept.
func (p *Process) errorf(format string, args ...any) error {
	err := fmt.Errorf("%s: "+format, append([]any{p.role}, args...)...)
	if p.stderr != nil {
		if s := p.stderr.String(); s != "" {
			err = fmt.Errorf("%w\n%s", err, s)
		}
	}
	return err
}

// Stderr returns what the child wrote on stderr so far, when Spec.Stderr
// was nil.
func (p *Process) Stderr() string {
	if p.stderr == nil {
		return ""
	}
	return p.stderr.String()
}

// buffer collects a child's stderr.
type buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
