// Package testimpl runs in-process implementations of the Pods API for the
// tests of the conformance suite: the reference implementation, or a copy
// with one behaviour broken, so that the tests can check that the suite
// catches it. It is test support only: the suite itself never uses it.
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
	src := manifest.New(im.ManifestDir, "node", manifest.WithLogger(im.logger), manifest.WithResyncInterval(-1))
	inst := &instance{cancel: cancel, shutdown: make(chan struct{}), done: make(chan struct{})}

	queue := WatchQueue
	if im.brk == NeverDrop {
		queue = 100000
	}
	limiter := rate.NewLimiter(rate.Limit(im.QPS), Burst)
	var h podsv1alpha1connect.PodsHandler = service.New(st, service.WithWatchQueue(queue), service.WithMetrics(im.metrics),
		service.WithShutdown(inst.shutdown), service.WithLogger(im.logger))
	b := &broken{PodsHandler: h, brk: im.brk, store: st, limiter: limiter, served: served}
	guards := service.Guards{Metrics: im.metrics, Ready: ready, Limiter: limiter}
	if im.brk == SeparateBuckets {
		guards.Limiter = nil
		b.listLimiter, b.getLimiter = rate.NewLimiter(rate.Limit(im.QPS), Burst), rate.NewLimiter(rate.Limit(im.QPS), Burst)
	}
	h = b
	ints := service.Interceptors(guards)
	if im.brk == IgnoreFieldMasks {
		ints = ints[:3]
	}
	health := grpchealth.NewStaticChecker(podsv1alpha1connect.PodsName)
	health.SetStatus("", grpchealth.StatusNotServing)
	health.SetStatus(podsv1alpha1connect.PodsName, grpchealth.StatusNotServing)
	reflector := grpcreflect.NewStaticReflector(podsv1alpha1connect.PodsName)
	mux := http.NewServeMux()
	mux.Handle(podsv1alpha1connect.NewPodsHandler(h, connect.WithInterceptors(ints...)))
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
	wg.Go(func() { inst.srv.Serve(l) })
	wg.Go(func() {
		select {
		case <-st.SyncedC():
			health.SetStatus("", grpchealth.StatusServing)
			health.SetStatus(podsv1alpha1connect.PodsName, grpchealth.StatusServing)
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
	if err := inst.srv.Shutdown(sctx); err != nil {
		inst.srv.Close()
	}
	inst.cancel()
	<-inst.done
	return nil
}

// broken wraps the reference handler and breaks one behaviour.
type broken struct {
	podsv1alpha1connect.PodsHandler
	brk     Break
	store   *store.Store
	limiter *rate.Limiter
	served  func()
	// listLimiter and getLimiter are the separate buckets of
	// SeparateBuckets.
	listLimiter, getLimiter *rate.Limiter
}

func (b *broken) ListPods(ctx context.Context, req *connect.Request[podsv1alpha1.PodListRequest]) (*connect.Response[podsv1alpha1.PodListResponse], error) {
	defer b.served()
	if b.listLimiter != nil && !b.listLimiter.Allow() {
		return nil, connect.NewError(connect.CodeResourceExhausted, errors.New("rate limited"))
	}
	return b.PodsHandler.ListPods(ctx, req)
}

func (b *broken) GetPod(ctx context.Context, req *connect.Request[podsv1alpha1.PodGetRequest]) (*connect.Response[podsv1alpha1.PodGetResponse], error) {
	defer b.served()
	if b.getLimiter != nil && !b.getLimiter.Allow() {
		return nil, connect.NewError(connect.CodeResourceExhausted, errors.New("rate limited"))
	}
	resp, err := b.PodsHandler.GetPod(ctx, req)
	if b.brk == UnknownForMissing && connect.CodeOf(err) == connect.CodeNotFound {
		return nil, connect.NewError(connect.CodeUnknown, errors.New("no such pod"))
	}
	return resp, err
}

func (b *broken) WatchPods(ctx context.Context, req *connect.Request[podsv1alpha1.PodWatchRequest], stream *connect.ServerStream[podsv1alpha1.PodWatchResponse]) error {
	b.served()
	switch b.brk {
	case RateLimitedWatches:
		if !b.limiter.Allow() {
			return connect.NewError(connect.CodeResourceExhausted, errors.New("rate limited"))
		}
	case NoSyncMarker:
		return b.watchWithoutMarker(ctx, stream)
	}
	return b.PodsHandler.WatchPods(ctx, req, stream)
}

// watchWithoutMarker is a watch that forgets the sync marker.
func (b *broken) watchWithoutMarker(ctx context.Context, stream *connect.ServerStream[podsv1alpha1.PodWatchResponse]) error {
	snapshot, w := b.store.Watch(WatchQueue, func(int) {})
	defer w.Stop()
	send := func(t podsv1alpha1.EventType, p *store.Pod) error {
		pod := new(corev1pb.Pod)
		if err := proto.Unmarshal(p.Raw(), pod); err != nil {
			return err
		}
		return stream.Send(&podsv1alpha1.PodWatchResponse{Type: t, Pod: pod})
	}
	for _, p := range snapshot {
		if err := send(podsv1alpha1.EventType_EVENT_TYPE_ADDED, p); err != nil {
			return err
		}
	}
	types := map[store.EventType]podsv1alpha1.EventType{
		store.Added: podsv1alpha1.EventType_EVENT_TYPE_ADDED, store.Modified: podsv1alpha1.EventType_EVENT_TYPE_MODIFIED, store.Deleted: podsv1alpha1.EventType_EVENT_TYPE_DELETED,
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.Dropped():
			return connect.NewError(connect.CodeResourceExhausted, errors.New("fell behind"))
		case <-w.Ready():
			for _, ev := range w.Take(nil) {
				if err := send(types[ev.Type], ev.Pod); err != nil {
					return err
				}
			}
		}
	}
}
