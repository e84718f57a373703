package stress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// child is a stress server running as a child process.
type child struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan string
	stderr  *syncBuffer
	dir     string
	socket  string
	metrics string
	exited  chan struct{} // closed when the child exited
	exitErr error         // how, once exited is closed
}

// syncBuffer collects the child's stderr.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startChild starts the stress server with args and waits until it serves.
func startChild(args ...string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "podsapi-stress")
	if err != nil {
		return nil, err
	}
	c := &child{dir: dir, lines: make(chan string, 16), stderr: &syncBuffer{}, exited: make(chan struct{})}
	c.cmd = exec.Command(exe, append([]string{"--socket", filepath.Join(dir, "pods.sock")}, args...)...)
	c.cmd.Env = append(os.Environ(), ChildEnv+"=1")
	c.cmd.Stderr = c.stderr
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		c.exitErr = c.cmd.Wait()
		close(c.exited)
	}()
	line, err := c.expect("ready", 30*time.Second)
	if err != nil {
		c.kill()
		return nil, fmt.Errorf("start the stress server: %w\n%s", err, c.stderr)
	}
	f := strings.Fields(line)
	c.socket, c.metrics = f[1], f[2]
	return c, nil
}

// expect returns the next stdout line, which must start with prefix.
func (c *child) expect(prefix string, timeout time.Duration) (string, error) {
	select {
	case line, ok := <-c.lines:
		if !ok {
			return "", errors.New("the stress server exited")
		}
		if !strings.HasPrefix(line, prefix) {
			return "", fmt.Errorf("stress server said %q, want %q", line, prefix)
		}
		return line, nil
	case <-time.After(timeout):
		return "", fmt.Errorf("stress server did not say %q within %v", prefix, timeout)
	}
}

// churn makes n changes at rate per second and returns when they are made.
func (c *child) churn(n, rate int) error {
	if _, err := fmt.Fprintf(c.stdin, "churn %d %d\n", n, rate); err != nil {
		return err
	}
	_, err := c.expect("churned", time.Duration(n/max(rate, 1))*time.Second+time.Minute)
	return err
}

// gc makes the child collect garbage and return free memory to the system.
func (c *child) gc() error {
	if _, err := fmt.Fprintln(c.stdin, "gc"); err != nil {
		return err
	}
	_, err := c.expect("ok", 30*time.Second)
	return err
}

// metric returns the sum of the series of the metric name.
func (c *child) metric(name string) (float64, error) {
	resp, err := http.Get("http://" + c.metrics + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for _, m := range families[name].GetMetric() {
		sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
	}
	return sum, nil
}

// waitMetric waits until cond holds for the metric, polling every 50 ms,
// and returns how long it took.
func (c *child) waitMetric(name string, cond func(float64) bool, timeout time.Duration) (time.Duration, float64, error) {
	start := time.Now()
	for {
		v, err := c.metric(name)
		if err != nil {
			return 0, v, err
		}
		if cond(v) {
			return time.Since(start), v, nil
		}
		if time.Since(start) > timeout {
			return time.Since(start), v, fmt.Errorf("%s = %v after %v", name, v, timeout)
		}
		time.Sleep(50 * time.Millisecond) // polling the child's metrics
	}
}

// rss returns the child's resident set size in bytes.
func (c *child) rss() int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return -1
}

// fds returns the number of the child's open file descriptors.
func (c *child) fds() int {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", c.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	return len(entries)
}

// badLogs returns the child's log lines at error level or about panics.
func (c *child) badLogs() []string {
	var bad []string
	for line := range strings.SplitSeq(c.stderr.String(), "\n") {
		if strings.Contains(line, "level=ERROR") || strings.Contains(line, "panic") {
			bad = append(bad, line)
		}
	}
	return bad
}

// stop sends SIGTERM and waits for the exit, at most timeout; it reports
// how long the exit took, and fails unless the child exited with 0 and
// removed its socket.
func (c *child) stop(timeout time.Duration) (time.Duration, error) {
	defer os.RemoveAll(c.dir)
	start := time.Now()
	c.stdin.Close()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, err
	}
	select {
	case <-c.exited:
		took := time.Since(start)
		if err := c.exitErr; err != nil {
			return took, fmt.Errorf("stress server exited with %v\n%s", err, c.stderr)
		}
		if _, err := os.Lstat(c.socket); !errors.Is(err, os.ErrNotExist) {
			return took, fmt.Errorf("socket %s left after exit: %v", c.socket, err)
		}
		return took, nil
	case <-time.After(timeout):
		c.kill()
		return timeout, fmt.Errorf("stress server did not exit within %v of SIGTERM", timeout)
	}
}

// kill ends the child at once.
func (c *child) kill() {
	select {
	case <-c.exited:
		os.RemoveAll(c.dir)
		return
	default:
	}
	_ = c.cmd.Process.Kill()
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
	}
	os.RemoveAll(c.dir)
}

// ctxDone is a helper for loops bounded by a context.
func ctxDone(ctx context.Context) bool { return ctx.Err() != nil }
