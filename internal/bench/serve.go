package bench

import (
	"bufio"
	"context"
	"encoding/binary"
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

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/emptypb"
	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/fieldmask"
	"github.com/podsapi/podsapi/internal/memlimit"
	"github.com/podsapi/podsapi/internal/podstest"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
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
		memlimit.SetGCPercent(memlimit.DefaultGCPercent)
		st := store.New()
		for _, p := range in.pods {
			st.Upsert(p)
		}
		st.MarkSynced()
		in.src = storeSource{st}
		in.reg = prometheus.NewRegistry()
		srv, err := server.New(st, server.Config{
			Socket: cfg.Socket, QPS: -1, WatchQueue: cfg.WatchQueue,
			// The harness opens a connection per watcher, up to 1,000
			// of one UID: it measures what they cost, not the limits
			// that admit them (256 connections, 1,000 watches per UID).
			MaxConnections: 4096, MaxWatchersPerUID: -1,
			Registry: in.reg, ShutdownTimeout: 2 * time.Second, HostProc: cfg.HostProc,
			Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
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

// ---- Baseline A: pods kept as k8s.io/api objects, marshalled per request.

type eventA struct {
	typ byte // 1 added, 2 modified, 3 deleted
	pod *corev1.Pod
}

type watcherA struct {
	events  chan eventA
	dropped chan struct{}
}

// storeA keeps k8s.io/api pods, as the kubelet's pod manager does, and
// marshals them for every request and every watcher.
type storeA struct {
	mu       sync.Mutex
	pods     []*corev1.Pod // sorted; replaced on write, never modified
	index    map[types.UID]int
	watchers map[*watcherA]struct{}
	queue    int
}

func newStoreA(pods []*corev1.Pod, queue int) *storeA {
	a := &storeA{index: map[types.UID]int{}, watchers: map[*watcherA]struct{}{}, queue: max(queue, 1)}
	a.pods = slices.Clone(pods)
	slices.SortFunc(a.pods, func(x, y *corev1.Pod) int {
		return strings.Compare(x.Namespace+"/"+x.Name+"/"+string(x.UID), y.Namespace+"/"+y.Name+"/"+string(y.UID))
	})
	for i, p := range a.pods {
		a.index[p.UID] = i
	}
	return a
}

func (a *storeA) update(p *corev1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	i, ok := a.index[p.UID]
	if !ok {
		return
	}
	pods := slices.Clone(a.pods)
	pods[i] = p
	a.pods = pods
	for w := range a.watchers {
		select {
		case w.events <- eventA{2, p}:
		default:
			delete(a.watchers, w)
			close(w.dropped)
		}
	}
}

func (a *storeA) list() []*corev1.Pod {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pods
}

func (a *storeA) get(uid types.UID) *corev1.Pod {
	a.mu.Lock()
	defer a.mu.Unlock()
	if i, ok := a.index[uid]; ok {
		return a.pods[i]
	}
	return nil
}

func (a *storeA) watch() ([]*corev1.Pod, *watcherA) {
	w := &watcherA{events: make(chan eventA, a.queue), dropped: make(chan struct{})}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.watchers[w] = struct{}{}
	return a.pods, w
}

func (a *storeA) stop(w *watcherA) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.watchers, w)
}

// maskOf returns the field mask of the incoming gRPC call.
func maskOf(ctx context.Context) (*fieldmask.Mask, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	h := http.Header{}
	for _, k := range []string{fieldmask.Header, fieldmask.BinaryHeader} {
		for _, v := range md.Get(k) {
			h.Add(k, v)
		}
	}
	return fieldmask.FromHeader(h)
}

// marshalA marshals p now and trims it by mask: the per-request cost model.
func marshalA(dst []byte, p *corev1.Pod, mask *fieldmask.Mask) ([]byte, error) {
	raw, err := p.Marshal()
	if err != nil {
		return dst, err
	}
	if mask != nil {
		if raw, err = mask.AppendProjection(nil, raw); err != nil {
			return dst, err
		}
	}
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	return protowire.AppendBytes(dst, raw), nil
}

func (a *storeA) grpcServer() *grpc.Server {
	gs := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.MaxConcurrentStreams(1000))
	gs.RegisterService(&grpc.ServiceDesc{
		ServiceName: "kubelet.pods.v1alpha1.Pods",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			{MethodName: "ListPods", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				var req []byte
				if err := dec(&req); err != nil {
					return nil, err
				}
				mask, err := maskOf(ctx)
				if err != nil {
					return nil, err
				}
				var out []byte
				for _, p := range a.list() {
					if out, err = marshalA(out, p, mask); err != nil {
						return nil, err
					}
				}
				return out, nil
			}},
			{MethodName: "GetPod", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				var req []byte
				if err := dec(&req); err != nil {
					return nil, err
				}
				mask, err := maskOf(ctx)
				if err != nil {
					return nil, err
				}
				p := a.get(types.UID(stringField(req, 1)))
				if p == nil {
					return nil, errors.New("not found")
				}
				return marshalA(nil, p, mask)
			}},
		},
		Streams: []grpc.StreamDesc{{StreamName: "WatchPods", ServerStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
			var req []byte
			if err := ss.RecvMsg(&req); err != nil {
				return err
			}
			mask, err := maskOf(ss.Context())
			if err != nil {
				return err
			}
			if mask != nil {
				if mask, err = mask.Union("metadata.namespace", "metadata.name", "metadata.uid"); err != nil {
					return err
				}
			}
			snap, w := a.watch()
			defer a.stop(w)
			send := func(t byte, p *corev1.Pod) error {
				b, err := marshalA(nil, p, mask)
				if err != nil {
					return err
				}
				b = protowire.AppendVarint(protowire.AppendTag(b, 2, protowire.VarintType), uint64(t))
				return ss.SendMsg(b)
			}
			for _, p := range snap {
				if err := send(1, p); err != nil {
					return err
				}
			}
			if err := ss.SendMsg([]byte{2 << 3, 4}); err != nil {
				return err
			}
			for {
				select {
				case <-ss.Context().Done():
					return ss.Context().Err()
				case <-w.dropped:
					return errors.New("fell behind")
				case ev := <-w.events:
					if err := send(ev.typ, ev.pod); err != nil {
						return err
					}
				}
			}
		}}},
	}, nil)
	return gs
}

// stringField returns string field num of the message in b, or "".
func stringField(b []byte, num protowire.Number) string {
	v, _ := bytesField(b, num)
	return string(v)
}

// bytesField returns the last length-delimited field num of the message in b.
func bytesField(b []byte, num protowire.Number) ([]byte, bool) {
	var out []byte
	found := false
	for len(b) > 0 {
		n, t, l := protowire.ConsumeTag(b)
		if l < 0 {
			return out, found
		}
		b = b[l:]
		if n == num && t == protowire.BytesType {
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return out, found
			}
			out, found = v, true
			b = b[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(n, t, b)
		if l < 0 {
			return out, found
		}
		b = b[l:]
	}
	return out, found
}

// varintField returns varint field num of the message in b, or 0.
func varintField(b []byte, num protowire.Number) uint64 {
	var out uint64
	for len(b) > 0 {
		n, t, l := protowire.ConsumeTag(b)
		if l < 0 {
			return out
		}
		b = b[l:]
		if n == num && t == protowire.VarintType {
			v, l := protowire.ConsumeVarint(b)
			if l < 0 {
				return out
			}
			out = v
			b = b[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(n, t, b)
		if l < 0 {
			return out
		}
		b = b[l:]
	}
	return out
}

// ---- Baseline B: the kubelet's /pods, a PodList encoded as JSON per request.

type storeB struct {
	mu    sync.Mutex
	pods  []*corev1.Pod
	index map[types.UID]int
	codec k8sruntime.Encoder
}

func newStoreB(pods []*corev1.Pod) *storeB {
	scheme := k8sruntime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	b := &storeB{pods: slices.Clone(pods), index: map[types.UID]int{}}
	b.codec = serializer.NewCodecFactory(scheme).LegacyCodec(schema.GroupVersion{Version: "v1"})
	for i, p := range b.pods {
		b.index[p.UID] = i
	}
	return b
}

func (b *storeB) update(p *corev1.Pod) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i, ok := b.index[p.UID]; ok {
		pods := slices.Clone(b.pods)
		pods[i] = p
		b.pods = pods
	}
}

// ServeHTTP is the kubelet's encodePods: copy the pods into a PodList and
// encode it with the legacy codec, for every request.
func (b *storeB) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	pods := b.pods
	b.mu.Unlock()
	list := new(corev1.PodList)
	for _, p := range pods {
		list.Items = append(list.Items, *p)
	}
	data, err := k8sruntime.Encode(b.codec, list)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(data)
}

// ---- Floors.

// floorRPCServer serves an empty unary connect RPC with the http.Server
// settings of our server.
func floorRPCServer() *http.Server {
	mux := http.NewServeMux()
	mux.Handle(methodEmpty, connect.NewUnaryHandler(methodEmpty, func(context.Context, *connect.Request[emptypb.Empty]) (*connect.Response[emptypb.Empty], error) {
		return connect.NewResponse(&emptypb.Empty{}), nil
	}))
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Server{
		Handler: mux, Protocols: protocols,
		ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10,
		HTTP2: &http.HTTP2Config{MaxConcurrentStreams: server.DefaultMaxStreams, MaxDecoderHeaderTableSize: 16 << 10},
	}
}

// serveRaw serves the trivial floor protocol: the client sends a 4-byte
// big-endian length n, the server answers with a 4-byte n and n bytes.
func serveRaw(ctx context.Context, l net.Listener) error {
	var (
		mu  sync.Mutex
		buf []byte
	)
	payload := func(n int) []byte {
		mu.Lock()
		defer mu.Unlock()
		if len(buf) < n {
			buf = make([]byte, n)
			for i := range buf {
				buf[i] = byte(i)
			}
		}
		return buf[:n]
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			return ignoreClosed(err)
		}
		wg.Go(func() {
			defer c.Close()
			go func() { <-ctx.Done(); c.Close() }()
			r := bufio.NewReader(c)
			var hdr [4]byte
			for {
				if _, err := io.ReadFull(r, hdr[:]); err != nil {
					return
				}
				n := int(binary.BigEndian.Uint32(hdr[:]))
				bufs := net.Buffers{hdr[:], payload(n)}
				if _, err := bufs.WriteTo(c); err != nil {
					return
				}
			}
		})
	}
}
