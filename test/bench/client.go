package bench

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/podsapi/podsapi/fieldmask"
	"github.com/podsapi/podsapi/test/childproc"
)

// roleServer is the role (childproc.Role) of a re-executed benchmark binary
// that serves one implementation.
const roleServer = "bench-server"

// rawCodec passes messages as bytes: the client never decodes responses and
// baseline A's server writes the bytes it marshalled.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	switch m := v.(type) {
	case []byte:
		return m, nil
	case *[]byte:
		return *m, nil
	}
	return nil, fmt.Errorf("rawCodec: cannot marshal %T", v)
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("rawCodec: cannot unmarshal into %T", v)
	}
	*p = data
	return nil
}

// child is a server running in its own process.
type child struct {
	impl   string
	pods   int
	socket string
	proc   *childproc.Process // nil for in-process servers (tests)
	ctl    *http.Client
	done   chan error         // the result of an in-process server
	inproc context.CancelFunc // set for in-process servers
}

// childOptions says how to start servers.
type childOptions struct {
	dir        string // socket directory
	inProcess  bool   // serve in this process (go test -bench)
	cpuprofile string // directory of CPU profiles, or ""
	stderr     io.Writer
	watchQueue int
	oursEnv    []string // extra environment of our server's children
}

var childSeq struct {
	sync.Mutex
	n int
}

// startChild starts a server for impl with pods pods.
func startChild(ctx context.Context, o childOptions, impl string, pods int, extra ...string) (*child, error) {
	childSeq.Lock()
	childSeq.n++
	n := childSeq.n
	childSeq.Unlock()
	sock := filepath.Join(o.dir, fmt.Sprintf("s%d.sock", n))
	c := &child{impl: impl, pods: pods, socket: sock, done: make(chan error, 1)}
	c.ctl = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock+".ctl")
	}}}
	if o.inProcess {
		sctx, cancel := context.WithCancel(context.Background())
		c.inproc = cancel
		ready := make(chan struct{})
		go func() {
			c.done <- serve(sctx, serveConfig{Impl: impl, Pods: pods, Socket: sock, WatchQueue: o.watchQueue, MaxLife: time.Hour}, func() { close(ready) })
		}()
		select {
		case <-ready:
			return c, nil
		case err := <-c.done:
			return nil, fmt.Errorf("start %s: %v", impl, err)
		case <-time.After(30 * time.Second):
			cancel()
			return nil, fmt.Errorf("start %s: not ready after 30s", impl)
		}
	}
	args := []string{"serve", "--impl", impl, "--pods", strconv.Itoa(pods), "--socket", sock, "--watch-queue", strconv.Itoa(o.watchQueue)}
	if o.cpuprofile != "" {
		args = append(args, "--cpuprofile", filepath.Join(o.cpuprofile, fmt.Sprintf("%s-%d-%d.pprof", impl, pods, n)))
	}
	spec := childproc.Spec{Role: roleServer, Args: append(args, extra...), Stderr: o.stderr}
	if impl == ImplOurs {
		spec.Env = o.oursEnv
	}
	proc, err := childproc.Start(spec)
	if err != nil {
		return nil, err
	}
	c.proc = proc
	wait, cancel := context.WithTimeoutCause(ctx, 60*time.Second, errors.New("not ready after 60s"))
	defer cancel()
	if _, err := proc.Expect(wait, "READY"); err != nil {
		c.stop()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("start %s: %w", impl, err)
	}
	return c, nil
}

// stop ends the child: stdin closes, then after 10 s it is killed.
func (c *child) stop() {
	if c.inproc != nil {
		c.inproc()
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
		}
		return
	}
	c.proc.CloseStdin()
	_ = c.proc.Wait(10 * time.Second) // killed after 10 s; the run reports what it measured
	c.ctl.CloseIdleConnections()
}

// pid is the process ID of the server: the child's, or this process's for
// an in-process server.
func (c *child) pid() int {
	if c.proc == nil {
		return os.Getpid()
	}
	return c.proc.Pid()
}

// stats reads the child's control socket.
func (c *child) stats() (childStats, error) {
	var st childStats
	resp, err := c.ctl.Get("http://ctl/stats")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

func (c *child) call(path string) error {
	resp, err := c.ctl.Get("http://ctl" + path)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", path, resp.Status)
	}
	return nil
}

// grpcConn dials a gRPC server on socket with the raw codec.
func grpcConn(socket string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}), grpc.MaxCallRecvMsgSize(1<<30)))
}

// withMask adds a field mask header to ctx.
func withMask(ctx context.Context, mask string) context.Context {
	if mask == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, fieldmask.Header, mask)
}

// caller performs one request on a connection of its own kind and returns
// the response bytes it received.
type caller func(ctx context.Context) (int, error)

// clientFactory makes a caller per concurrent client (they may share a
// connection) and a close function.
type clientFactory func(k int) ([]caller, func(), error)

func grpcUnary(socket, method, mask string, req []byte) clientFactory {
	return func(k int) ([]caller, func(), error) {
		conn, err := grpcConn(socket)
		if err != nil {
			return nil, nil, err
		}
		callers := make([]caller, k)
		for i := range callers {
			callers[i] = func(ctx context.Context) (int, error) {
				var resp []byte
				err := conn.Invoke(withMask(ctx, mask), method, req, &resp)
				return len(resp), err
			}
		}
		return callers, func() { conn.Close() }, nil
	}
}

func httpGet(socket, url string) clientFactory {
	return func(k int) ([]caller, func(), error) {
		tr := &http.Transport{MaxIdleConnsPerHost: k, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}}
		hc := &http.Client{Transport: tr}
		callers := make([]caller, k)
		for i := range callers {
			callers[i] = func(ctx context.Context) (int, error) {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				if err != nil {
					return 0, err
				}
				resp, err := hc.Do(req)
				if err != nil {
					return 0, err
				}
				defer resp.Body.Close()
				n, err := io.Copy(io.Discard, resp.Body)
				if err == nil && resp.StatusCode != http.StatusOK {
					err = errors.New(resp.Status)
				}
				return int(n), err
			}
		}
		return callers, tr.CloseIdleConnections, nil
	}
}

func rawFloor(socket string, size int) clientFactory {
	return func(k int) ([]caller, func(), error) {
		var conns []net.Conn
		closeAll := func() {
			for _, c := range conns {
				c.Close()
			}
		}
		callers := make([]caller, k)
		for i := range callers {
			c, err := net.Dial("unix", socket)
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			conns = append(conns, c)
			buf := make([]byte, size)
			var hdr [4]byte
			binary.BigEndian.PutUint32(hdr[:], uint32(size))
			callers[i] = func(ctx context.Context) (int, error) {
				if _, err := c.Write(hdr[:]); err != nil {
					return 0, err
				}
				var h [4]byte
				if _, err := io.ReadFull(c, h[:]); err != nil {
					return 0, err
				}
				n := int(binary.BigEndian.Uint32(h[:]))
				if _, err := io.ReadFull(c, buf[:n]); err != nil {
					return 0, err
				}
				return 4 + n, nil
			}
		}
		return callers, closeAll, nil
	}
}

// loadResult is one closed-loop measurement.
type loadResult struct {
	Requests int     `json:"requests"`
	Seconds  float64 `json:"seconds"`
	MedianUs float64 `json:"medianUs"`
	P99Us    float64 `json:"p99Us"`
	Bytes    float64 `json:"bytesPerResponse"`
	// CPUUs is the server's CPU time per request: for paced measurements
	// the time its threads ran on a CPU (/proc/PID/task/*/schedstat, ns),
	// otherwise (or without schedstat) utime+stime (/proc/PID/stat, 10 ms
	// ticks).
	CPUUs float64 `json:"serverCpuUsPerRequest"`
	// StatCPUUs is utime+stime per request, whatever CPUUs is.
	StatCPUUs   float64 `json:"serverStatCpuUsPerRequest"`
	CPUSource   string  `json:"serverCpuSource"` // "schedstat" or "stat"
	Allocs      float64 `json:"serverAllocsPerRequest"`
	AllocBytes  float64 `json:"serverAllocBytesPerRequest"`
	RSSBytes    int64   `json:"serverRssBytes"`
	RPS         float64 `json:"requestsPerSecond"`
	CPUFraction float64 `json:"serverCpuCores"`
}

// load runs k closed-loop clients for d (at least minCount requests in all,
// at most maxCount, and never longer than 4 d plus one request). With pace
// set, the clients start one request every pace, as agents call, instead of
// back to back: a request that takes longer than pace delays the next.
func load(ctx context.Context, c *child, f clientFactory, k int, d time.Duration, minCount, maxCount int, pace time.Duration) (loadResult, error) {
	var r loadResult
	callers, closeFn, err := f(k)
	if err != nil {
		return r, err
	}
	defer closeFn()
	// Warm up: connections, caches, views.
	for i := range min(k, 4) {
		for range 2 {
			if _, err := callers[i](ctx); err != nil {
				return r, fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	st0, err := c.stats()
	if err != nil {
		return r, err
	}
	// The threads' counters: a thread that exits during the measurement
	// takes its run time with it, which Go processes rarely do.
	ps0, _ := sampleProc(c.pid())
	var (
		mu    sync.Mutex
		lats  []time.Duration
		bytes int64
		count int
		first error
		wg    sync.WaitGroup
	)
	start := time.Now()
	hard := start.Add(4 * d)
	for i := range k {
		wg.Go(func() {
			var mine []time.Duration
			var b int64
			for ctx.Err() == nil {
				mu.Lock()
				n := count
				if n >= maxCount || (n >= minCount && time.Since(start) >= d) || time.Now().After(hard) {
					mu.Unlock()
					break
				}
				count++
				mu.Unlock()
				if pace > 0 {
					select {
					case <-ctx.Done():
					case <-time.After(time.Until(start.Add(time.Duration(n) * pace))):
					}
				}
				t := time.Now()
				got, err := callers[i](ctx)
				mine = append(mine, time.Since(t))
				b += int64(got)
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					count = maxCount
					mu.Unlock()
					break
				}
			}
			mu.Lock()
			lats = append(lats, mine...)
			bytes += b
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	ps1, _ := sampleProc(c.pid())
	st1, err := c.stats()
	if err != nil {
		return r, err
	}
	if first != nil {
		return r, first
	}
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	slices.Sort(lats)
	n := len(lats)
	r.Requests = n
	r.Seconds = elapsed.Seconds()
	r.MedianUs = us(lats[n/2])
	r.P99Us = us(lats[min(n-1, n*99/100)])
	r.Bytes = float64(bytes) / float64(n)
	cpuTime := ps1.cpu - ps0.cpu
	r.StatCPUUs = us(cpuTime) / float64(n)
	r.CPUSource = "stat"
	if pace > 0 && ps0.runNs >= 0 && ps1.runNs >= 0 && ps0.threads > 0 && ps1.threads > 0 {
		// A paced measurement has few calls: 10 ms ticks are too coarse.
		cpuTime = time.Duration(ps1.runNs - ps0.runNs)
		r.CPUSource = "schedstat"
	}
	r.CPUUs = us(cpuTime) / float64(n)
	r.CPUFraction = cpuTime.Seconds() / elapsed.Seconds()
	r.Allocs = float64(st1.AllocObjects-st0.AllocObjects) / float64(n)
	r.AllocBytes = float64(st1.AllocBytes-st0.AllocBytes) / float64(n)
	r.RPS = float64(n) / elapsed.Seconds()
	r.RSSBytes, _ = childproc.RSS(c.pid())
	return r, nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
