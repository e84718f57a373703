package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/podsapi/podsapi/test/childproc"
)

// The footprint of podsapi-server itself, as a DaemonSet on every node
// pays it: its binary, the packages it links, and its memory once synced
// and idle with make run's settings (the example manifests, no Kubernetes
// API, no NRI). The other sections measure the server package in the
// harness's children, which link neither podsapi-server's sources nor its
// Kubernetes API.

// footprintPackage is the command measured.
const footprintPackage = "github.com/podsapi/podsapi/cmd/podsapi-server"

// footprintStarts is how many times the server is started: each figure is
// the median of the starts.
const footprintStarts = 3

// footprintIdle is how long the server is left alone once it reports
// SERVING, before its memory is read.
const footprintIdle = 2 * time.Second

// The bounds of the footprint's targets, about a fifth above what was
// measured when the door's reviews left k8s.io/apiserver's webhooks
// (33 MiB of VmRSS, 42 MiB of binary; before: 52 and 73): a dependency
// tree that grows them back misses them.
const (
	footprintRSSLimit    = 40 << 20
	footprintBinaryLimit = 52 << 20
)

// footprintResult is podsapi-server's binary and idle memory.
type footprintResult struct {
	BinaryBytes int64 `json:"binaryBytes"`
	// Packages is the count of `go list -deps` of the command, standard
	// library included.
	Packages int `json:"packages"`
	Starts   int `json:"starts"`
	// RSSBytes is VmRSS, HWMBytes VmHWM (the peak since the start), and
	// RSSFileBytes RssFile (the pages of files mapped, mostly the
	// binary's) of /proc/PID/status, medians of the starts.
	RSSBytes     int64 `json:"idleRssBytes"`
	HWMBytes     int64 `json:"idleHwmBytes"`
	RSSFileBytes int64 `json:"idleRssFileBytes"`
}

// runFootprint builds podsapi-server into dir and measures it.
func runFootprint(ctx context.Context, dir string) (*footprintResult, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, "podsapi-server")
	if err := childproc.Build(ctx, root, bin, footprintPackage); err != nil {
		return nil, err
	}
	st, err := os.Stat(bin)
	if err != nil {
		return nil, err
	}
	deps, err := goCmd(ctx, root, "list", "-deps", footprintPackage)
	if err != nil {
		return nil, fmt.Errorf("go list: %w\n%s", err, deps)
	}
	r := &footprintResult{BinaryBytes: st.Size(), Packages: len(strings.Fields(string(deps))), Starts: footprintStarts}
	var rss, hwm, file []int64
	for i := range footprintStarts {
		m, err := idleMemory(ctx, bin, filepath.Join(root, "examples", "manifests"), filepath.Join(dir, fmt.Sprintf("fp%d", i)))
		if err != nil {
			return nil, err
		}
		rss, hwm, file = append(rss, m["VmRSS"]), append(hwm, m["VmHWM"]), append(file, m["RssFile"])
	}
	r.RSSBytes, r.HWMBytes, r.RSSFileBytes = median(rss), median(hwm), median(file)
	return r, nil
}

// moduleRoot returns the folder of this module's go.mod.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("go env GOMOD: not in the module")
	}
	return filepath.Dir(mod), nil
}

// goCmd runs the go command with args in dir and returns its output.
func goCmd(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return stderr.Bytes(), err
	}
	return out, nil
}

// idleMemory starts bin on manifests with make run's settings (its socket
// and metrics under dir), waits until it reports SERVING, leaves it alone
// for footprintIdle, and returns the memory figures of its
// /proc/PID/status in bytes; then stops it.
func idleMemory(ctx context.Context, bin, manifests, dir string) (map[string]int64, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "s.sock")
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "--manifest-dir", manifests, "--socket", sock,
		"--metrics-address", "unix:"+filepath.Join(dir, "m.sock"), "--node-name", "node-1", "--log-level", "warn")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	if err := waitServing(ctx, bin, sock, done); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, stderr.Bytes())
	}
	select {
	case <-time.After(footprintIdle):
	case err := <-done:
		done <- err
		return nil, fmt.Errorf("podsapi-server ended: %v\n%s", err, stderr.Bytes())
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		return nil, err
	}
	m := map[string]int64{}
	for l := range strings.SplitSeq(string(b), "\n") {
		name, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		if kb, ok := strings.CutSuffix(strings.TrimSpace(v), " kB"); ok {
			if n, err := strconv.ParseInt(kb, 10, 64); err == nil {
				m[name] = n << 10
			}
		}
	}
	for _, k := range []string{"VmRSS", "VmHWM", "RssFile"} {
		if _, ok := m[k]; !ok {
			return nil, fmt.Errorf("no %s in /proc/%d/status", k, cmd.Process.Pid)
		}
	}
	return m, nil
}

// waitServing runs `bin probe --serving` until the server on sock reports
// SERVING, the server ends (done), or 60 s pass.
func waitServing(ctx context.Context, bin, sock string, done chan error) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if exec.CommandContext(ctx, bin, "probe", "--serving", "--socket", sock).Run() == nil {
			return nil
		}
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("podsapi-server ended before it served: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("podsapi-server not SERVING: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// median returns the median of v (the lower middle of an even count).
func median(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// footprintText is the section of podsapi-server's footprint.
func footprintText(r *Results) string {
	f := r.Footprint
	if f == nil {
		return "not measured\n"
	}
	return fmt.Sprintf("| binary | packages linked (go list -deps) | VmRSS | VmHWM | of which files mapped (RssFile: the binary's pages) |\n|---:|---:|---:|---:|---:|\n| %s | %d | %s | %s | %s |\n",
		fmtBytes(float64(f.BinaryBytes)), f.Packages, fmtBytes(float64(f.RSSBytes)), fmtBytes(float64(f.HWMBytes)), fmtBytes(float64(f.RSSFileBytes)))
}
