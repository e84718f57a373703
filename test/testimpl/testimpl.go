// Package testimpl runs in-process implementations of the Pods API for the
// tests of the conformance suite: the server podsapi-server serves, built by
// the same assembly (server.New), or that server with one fault planted
// (package test/faults, through hooks.Hooks), so that the tests can
// check that the suite catches it. Both wires are served, the typed
// kubelet.pods.v1alpha1.Pods and the kubelet's v1alpha1.Pods, and a fault
// is planted in whichever the suite judges. It is test support only, and
// internal so that implementers never see it beside the suite: the suite
// itself never uses it.
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
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/guard"
	"github.com/podsapi/podsapi/internal/hooks"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/source"
	"github.com/podsapi/podsapi/source/manifest"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/faults"
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
	// HTTP/2, no gRPC, the connections held until Stop.
	NoAnswer Break = "no-answer"
	// EmptyUIDInvalid answers GetPod of an empty UID with INVALID_ARGUMENT
	// on the kubelet wire, where a kubelet answers NOT_FOUND (it looks the
	// empty UID up like any other).
	EmptyUIDInvalid Break = "empty-uid-invalid"
	// IgnoreWatchSelectors ignores the selectors of WatchPods (the typed
	// wire): every watcher gets every pod. ListPods honours them.
	IgnoreWatchSelectors Break = "ignore-watch-selectors"
	// TooOldInvalid answers a resume_from too old to resume from with
	// INVALID_ARGUMENT instead of OUT_OF_RANGE, reason REVISION_TOO_OLD.
	TooOldInvalid Break = "too-old-invalid"
	// FindAlwaysDeleted answers FindPods as if include_deleted were always
	// set: deleted pods match without it.
	FindAlwaysDeleted Break = "find-always-deleted"
	// FindNeverWaits answers FindPods at once whatever its wait
	// (--max-find-wait negative): a key not known yet is NOT_FOUND.
	FindNeverWaits Break = "find-never-waits"
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
	QPS    float64
	brk    Break
	logger *slog.Logger
	mlis   net.Listener
	msrv   *http.Server

	mu      sync.Mutex
	running *instance
}

// instance is one run of the server, from Start to Stop.
type instance struct {
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan struct{}
}

// Start returns a started Impl with brk broken, logging to the test's
// output, closed at the end of the test.
func Start(t testing.TB, brk Break) *Impl {
	t.Helper()
	im, err := New(brk, t.Output())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { im.Close() })
	if err := im.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return im
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
		logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if brk == RateLimitedWatches || brk == SeparateBuckets {
		im.QPS = SlowQPS
	}
	if err := os.Mkdir(im.ManifestDir, 0o755); err != nil {
		return nil, err
	}
	im.mlis, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	// The metrics of the running instance, at one address across restarts.
	gather := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		im.mu.Lock()
		inst := im.running
		im.mu.Unlock()
		if inst == nil {
			return nil, nil
		}
		return inst.reg.Gather()
	})
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(gather, promhttp.HandlerOpts{}))
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
	source.Sink
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

// Start starts serving: server.New on a fresh store fed by the manifest
// source, with the Impl's fault planted through hooks.Hooks.
func (im *Impl) Start(context.Context) error {
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.running != nil {
		return errors.New("already running")
	}
	ctx, cancel := context.WithCancel(context.Background())
	st := store.New()
	var sink source.Sink = st
	release := make(chan struct{})
	var releaseOnce sync.Once
	served := func() { releaseOnce.Do(func() { close(release) }) }
	pods := &faults.Pods{Served: served, WatchQueue: WatchQueue}
	kubelet := &faults.Kubelet{Served: served, WatchQueue: WatchQueue}
	cfg := server.Config{
		Socket:   im.Socket,
		Logger:   im.logger,
		Registry: prometheus.NewRegistry(),
		Hooks:    &hooks.Hooks{Pods: pods.Hook(), Kubelet: kubelet.Hook()},
		Limits:   server.LimitsConfig{QPS: im.QPS, Burst: Burst, RateLimitDelay: -1},
		Watch:    server.WatchConfig{Queue: WatchQueue},
		// No write-stall timeout: a case's stalled watcher (SlowConsumer)
		// stays stalled for as long as the case takes, however busy the
		// machine; under two busy loops a case took 38 s, and the default
		// 30 s reset its stream before the case read it again. The suite
		// judges the drop of a slow watcher, not the stall guard, which
		// server/internal/transport tests on synctest's clock.
		Transport: server.TransportConfig{WriteStallTimeout: -1},
	}
	switch im.brk {
	case UnsyncedAnswers:
		sink = &gatedSink{Sink: st, release: release, done: ctx.Done()}
		cfg.Hooks.Interceptors = faults.Without(guard.NameReadiness)
	case IgnoreFieldMasks:
		cfg.Hooks.Interceptors = faults.Without(server.InterceptorFieldMasks)
	case NeverDrop:
		cfg.Watch.Queue = 100000
	case UnknownForMissing:
		pods.UnknownForMissing, kubelet.UnknownForMissing = true, true
	case NoSyncMarker:
		pods.NoSyncMarker, kubelet.NoSyncMarker = st, st
	case RateLimitedWatches:
		// One bucket for the watches of both wires, as for their unary
		// calls.
		pods.WatchLimiter = rate.NewLimiter(rate.Limit(im.QPS), Burst)
		kubelet.WatchLimiter = pods.WatchLimiter
	case SeparateBuckets:
		cfg.Limits.QPS = -1
		pods.ListLimiter, pods.GetLimiter = rate.NewLimiter(rate.Limit(im.QPS), Burst), rate.NewLimiter(rate.Limit(im.QPS), Burst)
		kubelet.ListLimiter, kubelet.GetLimiter = pods.ListLimiter, pods.GetLimiter
	case StalledWatch:
		cfg.Hooks.Pods, cfg.Hooks.Kubelet = faults.Stalled(st, WatchQueue)
	case EmptyUIDInvalid:
		kubelet.EmptyUIDInvalid = true
	case IgnoreWatchSelectors:
		sel := &faults.Selectors{IgnoreWatchSelectors: true}
		cfg.Hooks.Pods = sel.Around(cfg.Hooks.Pods)
	case FindNeverWaits:
		cfg.Limits.MaxFindWait = -1
	case FindAlwaysDeleted:
		pods.FindAlwaysDeleted = true
	case TooOldInvalid:
		sel := &faults.Selectors{TooOldInvalid: true}
		cfg.Hooks.Pods = sel.Around(cfg.Hooks.Pods)
	}
	var serve func(context.Context)
	if im.brk == NoAnswer {
		h, err := holdSocket(im.Socket)
		if err != nil {
			cancel()
			return err
		}
		serve = h.serve
	} else {
		srv, err := server.New(st, cfg)
		if err != nil {
			cancel()
			return err
		}
		serve = func(ctx context.Context) { srv.Serve(ctx) }
	}
	src := manifest.New(im.ManifestDir, "node", manifest.WithLogger(im.logger), manifest.WithResyncInterval(-1))
	inst := &instance{reg: cfg.Registry, cancel: cancel, done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Go(func() { src.Run(ctx, sink) })
	wg.Go(func() { serve(ctx) })
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
	inst.cancel()
	select {
	case <-inst.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// holder accepts connections on a socket and holds them without a word:
// an implementation that is there and never answers.
type holder struct {
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func holdSocket(path string) (*holder, error) {
	os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	l.(*net.UnixListener).SetUnlinkOnClose(true)
	return &holder{l: l}, nil
}

// serve holds the connections until ctx is done, then closes them and the
// socket.
func (h *holder) serve(ctx context.Context) {
	go func() {
		<-ctx.Done()
		h.l.Close()
	}()
	for {
		c, err := h.l.Accept()
		if err != nil {
			break
		}
		h.mu.Lock()
		h.conns = append(h.conns, c)
		h.mu.Unlock()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		c.Close()
	}
}
