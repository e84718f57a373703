// Package testimpl runs in-process implementations of the Pods API for the
// tests of the conformance suite: the reference implementation, or a copy
// with one behaviour broken, so that the tests can check that the suite
// catches it. Each serves both wires on its socket: the typed
// kubelet.pods.v1alpha1.Pods and the kubelet's own v1alpha1.Pods, and a
// break applies to whichever wire the suite judges. It is test support only:
// the suite itself never uses it.
package testimpl

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"google.golang.org/protobuf/proto"

	corev1pb "github.com/podsapi/podsapi/gen/k8s.io/api/core/v1"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/gen/v1alpha1"
	"github.com/podsapi/podsapi/gen/v1alpha1/v1alpha1connect"
	"github.com/podsapi/podsapi/service"
	"github.com/podsapi/podsapi/source/manifest"
	"github.com/podsapi/podsapi/store"
)

// Break names one behaviour to break.
type Break string

// The behaviours an Impl can break.
const (
	None Break = ""
	// UnsyncedAnswers answers before the pod source has synced: partial
	// data.
	UnsyncedAnswers Break = "unsynced-answers"
	// IgnoreFieldMasks ignores field masks (and does not validate them).
	IgnoreFieldMasks Break = "ignore-field-masks"
	// NeverDrop never drops a slow watcher (its queue is huge).
	NeverDrop Break = "never-drop"
	// UnknownForMissing answers UNKNOWN instead of NOT_FOUND.
	UnknownForMissing Break = "unknown-for-missing"
	// NoSyncMarker never sends EVENT_TYPE_INITIAL_SYNC_COMPLETE.
	NoSyncMarker Break = "no-sync-marker"
	// RateLimitedWatches applies the rate limit to WatchPods too.
	RateLimitedWatches Break = "rate-limited-watches"
	// SeparateBuckets gives ListPods and GetPod a rate limit each instead
	// of one shared.
	SeparateBuckets Break = "separate-buckets"
	// StalledWatch sends the initial snapshot and INITIAL_SYNC_COMPLETE,
	// then nothing more: the stream stays open, changes never come.
	StalledWatch Break = "stalled-watch"
	// NoAnswer accepts connections on the socket and never answers: no
	// HTTP/2, no gRPC, the connections stay open until Stop.
	NoAnswer Break = "no-answer"
	// EmptyUIDInvalid answers GetPod of an empty UID with INVALID_ARGUMENT
	// on the kubelet wire, where a kubelet answers NOT_FOUND (it looks the
	// empty UID up like any other).
	EmptyUIDInvalid Break = "empty-uid-invalid"
)

// Default rate limit and watch queue of every Impl.
const (
	QPS        = 100
	Burst      = 10
	WatchQueue = 16
	// SlowQPS is a rate for the Impls whose break is in the rate limit.
	// The suite tells a shared bucket from separate ones, or a rate-limited
	// watch from a free one, only when its calls are faster than 1/QPS: at
	// 100 qps a busy machine that takes more than 10 ms a call refills the
	// bucket as fast as the suite spends it, and a broken Impl passes. At 5
	// qps a call may take up to 200 ms.
	SlowQPS = 5
)

// Impl is an in-process implementation serving a manifest directory on a
// UNIX socket, with metrics, health and reflection. It implements
// conformance.Lifecycle.
type Impl struct {
	Socket      string
	ManifestDir string
	MetricsURL  string
	// QPS is the rate of the Impl's rate limit, read by Start: QPS by
	// default, SlowQPS for RateLimitedWatches and SeparateBuckets.
	QPS     float64
	brk     Break
	logger  *slog.Logger
	reg     *prometheus.Registry
	metrics *service.Metrics
	mlis    net.Listener
	msrv    *http.Server

	mu      sync.Mutex
	running *instance
}

type instance struct {
	srv      *http.Server
	hold     *holder // NoAnswer: the connections held instead of srv
	cancel   context.CancelFunc
	shutdown chan struct{}
	done     chan struct{}
}

// New returns a stopped Impl in a fresh temporary directory (removed by
// Close) with brk broken. Logs go to log (nil: discarded).
func New(brk Break, log io.Writer) (*Impl, error) {
	dir, err := os.MkdirTemp("", "cfimpl")
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = io.Discard
	}
	im := &Impl{Socket: filepath.Join(dir, "pods.sock"), ManifestDir: filepath.Join(dir, "manifests"), brk: brk, QPS: QPS,
		logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn})), reg: prometheus.NewRegistry()}
	if brk == RateLimitedWatches || brk == SeparateBuckets {
		im.QPS = SlowQPS
	}
	if err := os.Mkdir(im.ManifestDir, 0o755); err != nil {
		return nil, err
	}
	im.metrics = service.NewMetrics(im.reg)
	im.mlis, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(im.reg, promhttp.HandlerOpts{}))
	im.msrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go im.msrv.Serve(im.mlis)
	im.MetricsURL = "http://" + im.mlis.Addr().String() + "/metrics"
	return im, nil
}

// Close stops the Impl and removes its directory.
func (im *Impl) Close() error {
	err := im.Stop(context.Background())
	im.msrv.Close()
	os.RemoveAll(filepath.Dir(im.Socket))
	return err
}

// gatedSink holds the upserts after the first few, and the sync, until
// release is closed: an implementation that answers before it synced then
// answers with partial data.
type gatedSink struct {
	manifest.Sink
	n       int
	release chan struct{}
	done    <-chan struct{}
}

func (g *gatedSink) wait() {
	select {
	case <-g.release:
	case <-g.done:
	}
}

func (g *gatedSink) Upsert(p *corev1.Pod) {
	if g.n++; g.n > 5 {
		g.wait()
	}
	g.Sink.Upsert(p)
}

func (g *gatedSink) Delete(uid types.UID) { g.Sink.Delete(uid) }

func (g *gatedSink) MarkSynced() {
	g.wait()
	g.Sink.MarkSynced()
}

// Start starts serving.
func (im *Impl) Start(context.Context) error {
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.running != nil {
		return errors.New("already running")
	}
	ctx, cancel := context.WithCancel(context.Background())
	st := store.New()
	var sink manifest.Sink = st
	ready := st.Synced
	release := make(chan struct{})
	var releaseOnce sync.Once
	served := func() { releaseOnce.Do(func() { close(release) }) }
	if im.brk == UnsyncedAnswers {
		sink = &gatedSink{Sink: st, release: release, done: ctx.Done()}
		ready = func() bool { return true }
	}
	src := manifest.New(im.ManifestDir, "node", manifest.WithLogger(im.logger), manifest.WithResyncInterval(0))
	inst := &instance{cancel: cancel, shutdown: make(chan struct{}), done: make(chan struct{})}

	queue := WatchQueue
	if im.brk == NeverDrop {
		queue = 100000
	}
	limiter := rate.NewLimiter(rate.Limit(im.QPS), Burst)
	handlers := service.NewHandlers(st, service.WithWatchQueue(queue), service.WithMetrics(im.metrics),
		service.WithShutdown(inst.shutdown), service.WithLogger(im.logger))
	f := faults{brk: im.brk, store: st, limiter: limiter, served: served}
	guards := service.Guards{Metrics: im.metrics, Ready: ready, Limiter: limiter}
	if im.brk == SeparateBuckets {
		guards.Limiter = nil
		f.listLimiter, f.getLimiter = rate.NewLimiter(rate.Limit(im.QPS), Burst), rate.NewLimiter(rate.Limit(im.QPS), Burst)
	}
	ints := service.Interceptors(guards)
	if im.brk == IgnoreFieldMasks {
		// The field mask interceptor is the last (see service.Interceptors).
		ints = ints[:len(ints)-1]
	}
	services := []string{podsv1alpha1connect.PodsName, v1alpha1connect.PodsName}
	health := grpchealth.NewStaticChecker(services...)
	health.SetStatus("", grpchealth.StatusNotServing)
	for _, name := range services {
		health.SetStatus(name, grpchealth.StatusNotServing)
	}
	reflector := grpcreflect.NewStaticReflector(services...)
	mux := http.NewServeMux()
	mux.Handle(podsv1alpha1connect.NewPodsHandler(&broken{PodsHandler: handlers.Pods, faults: f}, connect.WithInterceptors(ints...)))
	mux.Handle(v1alpha1connect.NewPodsHandler(&brokenKubelet{PodsHandler: handlers.Kubelet, faults: f}, connect.WithInterceptors(ints...)))
	mux.Handle(grpchealth.NewHandler(health))
	mux.Handle(grpcreflect.NewHandlerV1(reflector))
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	protocols.SetHTTP1(true)
	inst.srv = &http.Server{Handler: mux, Protocols: protocols, ReadHeaderTimeout: 10 * time.Second}

	os.Remove(im.Socket)
	l, err := net.Listen("unix", im.Socket)
	if err != nil {
		cancel()
		return err
	}
	l.(*net.UnixListener).SetUnlinkOnClose(true)
	if err := os.Chmod(im.Socket, 0o600); err != nil {
		l.Close()
		cancel()
		return err
	}
	var wg sync.WaitGroup
	wg.Go(func() { src.Run(ctx, sink) })
	if im.brk == NoAnswer {
		inst.hold = &holder{l: l}
		wg.Go(inst.hold.serve)
	} else {
		wg.Go(func() { inst.srv.Serve(l) })
	}
	wg.Go(func() {
		select {
		case <-st.SyncedC():
			health.SetStatus("", grpchealth.StatusServing)
			for _, name := range services {
				health.SetStatus(name, grpchealth.StatusServing)
			}
		case <-ctx.Done():
		}
	})
	go func() {
		wg.Wait()
		close(inst.done)
	}()
	im.running = inst
	return nil
}

// Stop stops serving: open watches end, the socket is removed.
func (im *Impl) Stop(ctx context.Context) error {
	im.mu.Lock()
	inst := im.running
	im.running = nil
	im.mu.Unlock()
	if inst == nil {
		return nil
	}
	close(inst.shutdown)
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if inst.hold != nil {
		inst.hold.close()
	} else if err := inst.srv.Shutdown(sctx); err != nil {
		inst.srv.Close()
	}
	inst.cancel()
	<-inst.done
	return nil
}

// holder accepts connections and holds them without a word: an
// implementation that is there and never answers.
type holder struct {
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (h *holder) serve() {
	for {
		c, err := h.l.Accept()
		if err != nil {
			return
		}
		h.mu.Lock()
		h.conns = append(h.conns, c)
		h.mu.Unlock()
	}
}

func (h *holder) close() {
	h.l.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		c.Close()
	}
}

// faults holds the broken behaviours both wires share.
type faults struct {
	brk     Break
	store   *store.Store
	limiter *rate.Limiter
	served  func()
	// listLimiter and getLimiter are the separate buckets of
	// SeparateBuckets.
	listLimiter, getLimiter *rate.Limiter
}

var errRateLimited = connect.NewError(connect.CodeResourceExhausted, errors.New("rate limited"))

// unary applies the faults of a ListPods (get false) or GetPod (get true)
// before the call; it returns the error to answer instead, if any.
func (f *faults) unary(get bool) error {
	l := f.listLimiter
	if get {
		l = f.getLimiter
	}
	if l != nil && !l.Allow() {
		return errRateLimited
	}
	return nil
}

// getErr applies the faults of GetPod to its error.
func (f *faults) getErr(err error) error {
	if f.brk == UnknownForMissing && connect.CodeOf(err) == connect.CodeNotFound {
		return connect.NewError(connect.CodeUnknown, errors.New("no such pod"))
	}
	return err
}

// watch applies the faults of WatchPods. When it handles the watch itself
// (handled true), send sends one event: the type and the pod (nil for the
// sync marker).
func (f *faults) watch(ctx context.Context, send func(t store.EventType, marker bool, p *store.Pod) error) (handled bool, err error) {
	f.served()
	switch f.brk {
	case RateLimitedWatches:
		if !f.limiter.Allow() {
			return true, errRateLimited
		}
	case NoSyncMarker:
		return true, f.watchFromStore(ctx, send, false, true)
	case StalledWatch:
		return true, f.watchFromStore(ctx, send, true, false)
	}
	return false, nil
}

// watchFromStore is a watch of the store that forgets the sync marker
// unless marker, and the live events unless live (it then stays open,
// silent, until the client leaves).
func (f *faults) watchFromStore(ctx context.Context, send func(t store.EventType, marker bool, p *store.Pod) error, marker, live bool) error {
	snapshot, w := f.store.Watch(WatchQueue, func(int) {})
	defer w.Stop()
	for _, p := range snapshot {
		if err := send(store.Added, false, p); err != nil {
			return err
		}
	}
	if marker {
		if err := send(0, true, nil); err != nil {
			return err
		}
	}
	if !live {
		<-ctx.Done()
		return ctx.Err()
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.Dropped():
			return connect.NewError(connect.CodeResourceExhausted, errors.New("fell behind"))
		case <-w.Ready():
			for _, ev := range w.Take(nil) {
				if err := send(ev.Type, false, ev.Pod); err != nil {
					return err
				}
			}
		}
	}
}

// broken wraps the reference handler of the typed wire and breaks one
// behaviour.
type broken struct {
	podsv1alpha1connect.PodsHandler
	faults
}

func (b *broken) ListPods(ctx context.Context, req *connect.Request[podsv1alpha1.PodListRequest]) (*connect.Response[podsv1alpha1.PodListResponse], error) {
	defer b.served()
	if err := b.unary(false); err != nil {
		return nil, err
	}
	return b.PodsHandler.ListPods(ctx, req)
}

func (b *broken) GetPod(ctx context.Context, req *connect.Request[podsv1alpha1.PodGetRequest]) (*connect.Response[podsv1alpha1.PodGetResponse], error) {
	defer b.served()
	if err := b.unary(true); err != nil {
		return nil, err
	}
	resp, err := b.PodsHandler.GetPod(ctx, req)
	return resp, b.getErr(err)
}

var typedEvents = map[store.EventType]podsv1alpha1.EventType{
	store.Added: podsv1alpha1.EventType_EVENT_TYPE_ADDED, store.Modified: podsv1alpha1.EventType_EVENT_TYPE_MODIFIED, store.Deleted: podsv1alpha1.EventType_EVENT_TYPE_DELETED,
}

func (b *broken) WatchPods(ctx context.Context, req *connect.Request[podsv1alpha1.PodWatchRequest], stream *connect.ServerStream[podsv1alpha1.PodWatchResponse]) error {
	handled, err := b.watch(ctx, func(t store.EventType, marker bool, p *store.Pod) error {
		if marker {
			return stream.Send(&podsv1alpha1.PodWatchResponse{Type: podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE})
		}
		pod := new(corev1pb.Pod)
		if err := proto.Unmarshal(p.Raw(), pod); err != nil {
			return err
		}
		return stream.Send(&podsv1alpha1.PodWatchResponse{Type: typedEvents[t], Pod: pod})
	})
	if handled {
		return err
	}
	return b.PodsHandler.WatchPods(ctx, req, stream)
}

// brokenKubelet wraps the reference handler of the kubelet wire and breaks
// one behaviour. Unbroken, it answers GetPod of an empty UID with
// NOT_FOUND, as a kubelet does.
type brokenKubelet struct {
	v1alpha1connect.PodsHandler
	faults
}

func (b *brokenKubelet) ListPods(ctx context.Context, req *connect.Request[v1alpha1.ListPodsRequest]) (*connect.Response[v1alpha1.ListPodsResponse], error) {
	defer b.served()
	if err := b.unary(false); err != nil {
		return nil, err
	}
	return b.PodsHandler.ListPods(ctx, req)
}

func (b *brokenKubelet) GetPod(ctx context.Context, req *connect.Request[v1alpha1.GetPodRequest]) (*connect.Response[v1alpha1.GetPodResponse], error) {
	defer b.served()
	if err := b.unary(true); err != nil {
		return nil, err
	}
	if req.Msg.GetPodUID() == "" {
		if b.brk == EmptyUIDInvalid {
			return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("podUID must not be empty"))
		}
		return nil, b.getErr(connect.NewError(connect.CodeNotFound, errors.New(`pod with UID "" not found`)))
	}
	resp, err := b.PodsHandler.GetPod(ctx, req)
	return resp, b.getErr(err)
}

var kubeletEvents = map[store.EventType]v1alpha1.EventType{
	store.Added: v1alpha1.EventType_ADDED, store.Modified: v1alpha1.EventType_MODIFIED, store.Deleted: v1alpha1.EventType_DELETED,
}

func (b *brokenKubelet) WatchPods(ctx context.Context, req *connect.Request[v1alpha1.WatchPodsRequest], stream *connect.ServerStream[v1alpha1.WatchPodsEvent]) error {
	handled, err := b.watch(ctx, func(t store.EventType, marker bool, p *store.Pod) error {
		if marker {
			return stream.Send(&v1alpha1.WatchPodsEvent{Type: v1alpha1.EventType_INITIAL_SYNC_COMPLETE})
		}
		return stream.Send(&v1alpha1.WatchPodsEvent{Type: kubeletEvents[t], Pod: p.Raw()})
	})
	if handled {
		return err
	}
	return b.PodsHandler.WatchPods(ctx, req, stream)
}
