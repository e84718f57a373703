package stress

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/podsapi/podsapi/test/childproc"
)

// The roles of the stress binary's children (childproc.Role).
const (
	roleServer = "stress-server"
	roleFlood  = "stress-flood"
)

// child is a stress server running as a child process.
type child struct {
	proc    *childproc.Process
	dir     string
	socket  string
	metrics string
}

// startChild starts the stress server with args and waits until it serves.
func startChild(args ...string) (*child, error) {
	dir, err := os.MkdirTemp("", "podsapi-stress")
	if err != nil {
		return nil, err
	}
	// The server reads its clients' cgroups under a proc directory of its
	// own (see identify): a process not written there is named by its UID.
	if err := os.Mkdir(filepath.Join(dir, "proc"), 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	proc, err := childproc.Start(childproc.Spec{Role: roleServer, Args: append([]string{"--socket", filepath.Join(dir, "pods.sock"), "--host-proc", filepath.Join(dir, "proc")}, args...), Env: []string{childGoMemLimit}})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := limit.add(proc.Pid()); err != nil {
		proc.Kill()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("move the stress server into its cgroup: %w", err)
	}
	c := &child{proc: proc, dir: dir}
	line, err := c.expect("ready", 30*time.Second)
	if err != nil {
		c.kill()
		return nil, fmt.Errorf("start the stress server: %w", err)
	}
	f := strings.Fields(line)
	if len(f) != 3 {
		c.kill()
		return nil, fmt.Errorf("start the stress server: it said %q, want \"ready SOCKET METRICS\"", line)
	}
	c.socket, c.metrics = f[1], f[2]
	return c, nil
}

// identify writes the cgroup file the server reads for the process pid
// (<dir>/proc/PID/cgroup, its --host-proc), which names the client the
// process is to the server: its pod or systemd unit (see guard.Peer.Client).
// It must be written before the process connects; processes not identified
// are named by their UID, all root here, and so are one client.
func (c *child) identify(pid int, cgroup string) error {
	dir := filepath.Join(c.dir, "proc", strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cgroup), 0o644)
}

// expect returns the next stdout line, which must start with prefix.
func (c *child) expect(prefix string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return c.proc.Expect(ctx, prefix)
}

// churn makes n changes at rate per second and returns when they are made.
func (c *child) churn(n, rate int) error {
	if _, err := fmt.Fprintf(c.proc.Stdin(), "churn %d %d\n", n, rate); err != nil {
		return err
	}
	_, err := c.expect("churned", time.Duration(n/max(rate, 1))*time.Second+time.Minute)
	return err
}

// gc makes the child collect garbage and return free memory to the system.
func (c *child) gc() error {
	if _, err := fmt.Fprintln(c.proc.Stdin(), "gc"); err != nil {
		return err
	}
	_, err := c.expect("ok", 30*time.Second)
	return err
}

// metric returns the sum of the series of the metric name (of a summary,
// its count).
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
		sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue() + float64(m.GetSummary().GetSampleCount())
	}
	return sum, nil
}

// metricSeries returns the value of each series of the metric name, by the
// value of its label.
func (c *child) metricSeries(name, label string) (map[string]float64, error) {
	resp, err := http.Get("http://" + c.metrics + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, m := range families[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				out[l.GetValue()] += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
			}
		}
	}
	return out, nil
}

// waitMetric waits until cond holds for the metric, polling every 50 ms,
// and returns how long it took.
func (c *child) waitMetric(name string, cond func(float64) bool, timeout time.Duration) (time.Duration, float64, error) {
	return waitValue(name, func() (float64, error) { return c.metric(name) }, cond, timeout)
}

// watchesBesides returns the watches open by the clients other than
// client (podsapi_client_watches), as one scrape says them.
func (c *child) watchesBesides(client string) (float64, error) {
	by, err := c.metricSeries("podsapi_client_watches", "client")
	sum := 0.0
	for k, v := range by {
		if k != client {
			sum += v
		}
	}
	return sum, err
}

// waitValue waits until cond holds for what get returns, polling every
// 50 ms, and returns how long it took; what names it in the error.
func waitValue(what string, get func() (float64, error), cond func(float64) bool, timeout time.Duration) (time.Duration, float64, error) {
	start := time.Now()
	for {
		v, err := get()
		if err != nil {
			return 0, v, err
		}
		if cond(v) {
			return time.Since(start), v, nil
		}
		if time.Since(start) > timeout {
			return time.Since(start), v, fmt.Errorf("%s = %v after %v", what, v, timeout)
		}
		time.Sleep(50 * time.Millisecond) // polling the child's metrics
	}
}

// rss returns the child's resident set size in bytes, -1 when unknown.
func (c *child) rss() int64 {
	n, err := childproc.RSS(c.proc.Pid())
	if err != nil {
		return -1
	}
	return n
}

// fds returns the number of the child's open file descriptors, -1 when
// unknown.
func (c *child) fds() int {
	n, err := childproc.FDs(c.proc.Pid())
	if err != nil {
		return -1
	}
	return n
}

// badLogs returns the child's log lines at error level or about panics.
func (c *child) badLogs() []string {
	var bad []string
	for line := range strings.SplitSeq(c.proc.Stderr(), "\n") {
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
	c.proc.CloseStdin()
	if err := c.proc.Signal(syscall.SIGTERM); err != nil {
		return 0, err
	}
	err := c.proc.Wait(timeout)
	took := min(time.Since(start), timeout)
	if err != nil {
		return took, err
	}
	if _, err := os.Lstat(c.socket); !errors.Is(err, os.ErrNotExist) {
		return took, fmt.Errorf("socket %s left after exit: %v", c.socket, err)
	}
	return took, nil
}

// kill ends the child at once.
func (c *child) kill() {
	c.proc.Kill()
	os.RemoveAll(c.dir)
}

// ctxDone is a helper for loops bounded by a context.
func ctxDone(ctx context.Context) bool { return ctx.Err() != nil }
