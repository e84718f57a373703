package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/budget"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// The implementations a child process can serve.
const (
	ImplOurs      = "ours"
	ImplBaselineA = "baselineA"
	ImplBaselineB = "baselineB"
	ImplFloorRPC  = "floor-rpc"
	ImplFloorRaw  = "floor-raw"
	// ImplFloorConn answers cached bytes inline on a transport with one
	// goroutine per connection (floorconn.go): a measurement, not a server.
	ImplFloorConn = "floor-conn"
)

// Method names on the wire.
const (
	methodList  = "/kubelet.pods.v1alpha1.Pods/ListPods"
	methodGet   = "/kubelet.pods.v1alpha1.Pods/GetPod"
	methodWatch = "/kubelet.pods.v1alpha1.Pods/WatchPods"
	// The kubelet's own wire of the same API, served by ours beside the
	// typed one; its requests are encoded as the typed ones.
	methodKubeletList = "/v1alpha1.Pods/ListPods"
	methodKubeletGet  = "/v1alpha1.Pods/GetPod"
	methodEmpty       = "/bench.v1.Floor/Empty"
)

// serveConfig configures one benchmark server.
type serveConfig struct {
	Impl       string
	Pods       int
	Socket     string
	Churn      float64 // initial updates per second
	WatchQueue int
	CPUProfile string
	MaxLife    time.Duration
	// HostProc is our server's --host-proc (FindPods by pid and caller).
	HostProc string
}

// benchPods returns the n synthetic pods every implementation serves.
func benchPods(n int) []*corev1.Pod {
	pods := make([]*corev1.Pod, n)
	for i := range n {
		pods[i] = podstest.Pod(fmt.Sprintf("ns-%02d", i%10), fmt.Sprintf("pod-%05d-x7k2q", i), i)
	}
	return pods
}

// podSource is the store side of an implementation: what the churn writes to.
type podSource interface {
	update(p *corev1.Pod)
}

// instance is one running benchmark server in this process.
type instance struct {
	cfg     serveConfig
	pods    []*corev1.Pod // the current version of each pod, by index
	src     podSource
	reg     *prometheus.Registry
	rate    atomic.Uint64 // updates per 1000 s
	wake    chan struct{} // a new rate, for the churn idle without a ticker
	churnMu sync.Mutex    // held by a batch of updates, so that setRate waits for it
	updates atomic.Int64
	seq     atomic.Int64
}

// serveChild parses the flags of the hidden serve subcommand and serves
// until stdin closes, ctx is done or --max-life passes.
func serveChild(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg serveConfig
	fs.StringVar(&cfg.Impl, "impl", ImplOurs, "ours|baselineA|baselineB|floor-rpc|floor-raw|floor-conn")
	fs.IntVar(&cfg.Pods, "pods", 110, "number of pods")
	fs.StringVar(&cfg.Socket, "socket", "", "UNIX socket to serve on (the control socket is SOCKET.ctl)")
	fs.Float64Var(&cfg.Churn, "churn", 0, "status updates per second from the start")
	fs.IntVar(&cfg.WatchQueue, "watch-queue", 1000, "live events a watcher may have queued")
	fs.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of the server to this file")
	fs.DurationVar(&cfg.MaxLife, "max-life", 30*time.Minute, "exit after this long whatever happens")
	fs.StringVar(&cfg.HostProc, "host-proc", "", "our server's --host-proc (default /proc)")
	stdin := fs.Bool("stdin", true, "exit when stdin closes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.Socket == "" {
		return errors.New("serve: --socket is required")
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.MaxLife)
	defer cancel()
	if *stdin {
		go func() {
			io.Copy(io.Discard, os.Stdin)
			cancel()
		}()
	}
	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	return serve(ctx, cfg, func() { fmt.Fprintln(stdout, "READY") })
}

// serve runs the server cfg describes until ctx is done. ready is called
// once the server and its control socket accept connections.
func serve(ctx context.Context, cfg serveConfig, ready func()) error {
	in := &instance{cfg: cfg, pods: benchPods(cfg.Pods), wake: make(chan struct{}, 1)}
	in.setRate(cfg.Churn)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	errc := make(chan error, 4)

	switch cfg.Impl {
	case ImplOurs:
		// The runtime settings of podsapi-server (its main sets them),
		// unless --ours-env sets GOGC.
		budget.SetGCPercent(budget.DefaultGCPercent)
		st := store.New()
		for _, p := range in.pods {
			st.Upsert(p)
		}
		st.MarkSynced()
		in.src = storeSource{st}
		in.reg = prometheus.NewRegistry()
		srv, err := server.New(st, server.Config{
			Socket: cfg.Socket,
			// The harness opens a connection per watcher, up to 1,000
			// of one UID: it measures what they cost, not the limits
			// that admit them (256 connections, 1,000 watches per UID).
			Limits:    server.LimitsConfig{QPS: -1, MaxConnections: 4096, MaxWatchersPerClient: -1},
			Watch:     server.WatchConfig{Queue: cfg.WatchQueue},
			Transport: server.TransportConfig{ShutdownTimeout: 2 * time.Second},
			Registry:  in.reg,
			HostProc:  cfg.HostProc,
			Logger:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		})
		if err != nil {
			return err
		}
		wg.Go(func() { errc <- srv.Serve(ctx) })
	case ImplBaselineA:
		a := newStoreA(in.pods, cfg.WatchQueue)
		in.src = a
		l, err := listenUnix(cfg.Socket)
		if err != nil {
			return err
		}
		gs := a.grpcServer()
		wg.Go(func() { errc <- gs.Serve(l) })
		wg.Go(func() { <-ctx.Done(); gs.Stop() })
	case ImplBaselineB:
		b := newStoreB(in.pods)
		in.src = b
		l, err := listenUnix(cfg.Socket)
		if err != nil {
			return err
		}
		hs := &http.Server{Handler: b, ReadHeaderTimeout: 10 * time.Second}
		wg.Go(func() { errc <- ignoreClosed(hs.Serve(l)) })
		wg.Go(func() { <-ctx.Done(); hs.Close() })
	case ImplFloorRPC:
		l, err := listenUnix(cfg.Socket)
		if err != nil {
			return err
		}
		hs := floorRPCServer()
		wg.Go(func() { errc <- ignoreClosed(hs.Serve(l)) })
		wg.Go(func() { <-ctx.Done(); hs.Close() })
	case ImplFloorConn:
		resp, err := newFloorResponses(in.pods)
		if err != nil {
			return err
		}
		l, err := listenUnix(cfg.Socket)
		if err != nil {
			return err
		}
		wg.Go(func() { errc <- serveFloorConn(ctx, l, resp) })
	case ImplFloorRaw:
		l, err := listenUnix(cfg.Socket)
		if err != nil {
			return err
		}
		wg.Go(func() { errc <- serveRaw(ctx, l) })
		wg.Go(func() { <-ctx.Done(); l.Close() })
	default:
		return fmt.Errorf("serve: unknown --impl %q", cfg.Impl)
	}

	cl, err := listenUnix(cfg.Socket + ".ctl")
	if err != nil {
		cancel()
		return err
	}
	cs := &http.Server{Handler: in.ctlHandler(), ReadHeaderTimeout: 10 * time.Second}
	wg.Go(func() { errc <- ignoreClosed(cs.Serve(cl)) })
	wg.Go(func() { <-ctx.Done(); cs.Close() })
	if in.src != nil {
		wg.Go(func() { in.churn(ctx) })
	}
	ready()
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		cancel()
		return err
	}
}

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// listenUnix listens on a fresh UNIX socket at path, replacing a stale file.
func listenUnix(path string) (net.Listener, error) {
	os.Remove(path)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	return net.Listen("unix", path)
}

// setRate sets the churn rate; once it returns, no update of the old rate
// is applied.
func (in *instance) setRate(r float64) {
	in.rate.Store(uint64(max(r, 0) * 1000))
	select {
	case in.wake <- struct{}{}:
	default: // a wake is pending: churn reads the rate after it
	}
	in.churnMu.Lock() // wait for the update in progress
	in.churnMu.Unlock()
}

// churn applies status updates at the current rate, in batches every 5 ms,
// so that the rate holds on a busy machine. Each update sets
// metadata.resourceVersion to the time of the update (Unix nanoseconds) and
// bumps a container's restart count. The ticker runs only while the rate is
// not 0, so that an idle child wakes only for its server (the wakeups
// measurement).
func (in *instance) churn(ctx context.Context) {
	var t *time.Ticker
	var tick <-chan time.Time
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	var start time.Time
	var done int64
	var rate uint64
	for {
		switch r := in.rate.Load(); {
		case r == 0 && t != nil:
			t.Stop()
			t, tick, rate = nil, nil, 0
		case r != 0 && t == nil:
			t = time.NewTicker(5 * time.Millisecond)
			tick = t.C
		}
		select {
		case <-ctx.Done():
			return
		case <-in.wake:
		case now := <-tick:
			r := in.rate.Load()
			if r != rate {
				rate, start, done = r, now, 0
			}
			if rate == 0 {
				continue
			}
			due := int64(float64(rate) / 1000 * now.Sub(start).Seconds())
			// A server that cannot keep up applies at most 100 ms of
			// backlog at once rather than a growing burst.
			done = max(done, due-int64(rate/10_000)-1)
			for ; done < due && ctx.Err() == nil; done++ {
				in.churnMu.Lock()
				if in.rate.Load() != rate {
					in.churnMu.Unlock()
					break
				}
				in.updateOne()
				in.churnMu.Unlock()
			}
		}
	}
}

// updateOne writes a new version of the next pod in turn.
func (in *instance) updateOne() {
	i := int(in.seq.Add(1)-1) % len(in.pods)
	p := in.pods[i].DeepCopy()
	p.ResourceVersion = strconv.FormatInt(time.Now().UnixNano(), 10)
	if cs := p.Status.ContainerStatuses; len(cs) > 0 {
		cs[len(cs)-1].RestartCount++
	}
	in.pods[i] = p
	in.src.update(p)
	in.updates.Add(1)
}

// childStats is what the control socket reports.
type childStats struct {
	PID          int                `json:"pid"`
	AllocObjects uint64             `json:"allocObjects"`
	AllocBytes   uint64             `json:"allocBytes"`
	HeapBytes    uint64             `json:"heapBytes"`
	Goroutines   int                `json:"goroutines"`
	Updates      int64              `json:"updates"`
	Counters     map[string]float64 `json:"counters"`
}

func (in *instance) ctlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
		metrics.Read(s)
		st := childStats{
			PID: os.Getpid(), AllocObjects: s[0].Value.Uint64(), AllocBytes: s[1].Value.Uint64(), HeapBytes: s[2].Value.Uint64(),
			Goroutines: runtime.NumGoroutine(), Updates: in.updates.Load(), Counters: gatherCounters(in.reg),
		}
		json.NewEncoder(w).Encode(st)
	})
	mux.HandleFunc("/churn", func(w http.ResponseWriter, r *http.Request) {
		rate, err := strconv.ParseFloat(r.URL.Query().Get("rate"), 64)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		in.setRate(rate)
	})
	mux.HandleFunc("/gc", func(w http.ResponseWriter, r *http.Request) { debug.FreeOSMemory() })
	return mux
}

// gatherCounters returns the podsapi_* counters of reg (and of the default
// registry), keyed by name and labels.
func gatherCounters(reg *prometheus.Registry) map[string]float64 {
	out := map[string]float64{}
	gs := []prometheus.Gatherer{prometheus.DefaultGatherer}
	if reg != nil {
		gs = append(gs, reg)
	}
	for _, g := range gs {
		mfs, _ := g.Gather()
		for _, mf := range mfs {
			if !strings.HasPrefix(mf.GetName(), "podsapi_") && !strings.HasPrefix(mf.GetName(), "kubelet_pod_watch") {
				continue
			}
			for _, m := range mf.GetMetric() {
				out[metricKey(mf.GetName(), m)] += counterValue(m)
			}
		}
	}
	return out
}

func metricKey(name string, m *dto.Metric) string {
	var labels []string
	for _, l := range m.GetLabel() {
		labels = append(labels, l.GetName()+"="+l.GetValue())
	}
	slices.Sort(labels)
	if len(labels) == 0 {
		return name
	}
	return name + "{" + strings.Join(labels, ",") + "}"
}

func counterValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

// storeSource writes to our store.
type storeSource struct{ st *store.Store }

func (s storeSource) update(p *corev1.Pod) { s.st.Upsert(p) }
