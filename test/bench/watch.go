package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/podsapi/podsapi/test/childproc"
)

// ListMask is the mask of the masked ListPods measurements.
const ListMask = "metadata.name,metadata.namespace,metadata.uid,status.phase,status.podIPs"

// WatchMasks are the 10 distinct masks of the watch measurements. Each
// includes metadata.resourceVersion, where the churn writes the time of the
// update, so that every update reaches every watcher and its delay can be
// measured.
var WatchMasks = []string{
	ListMask + ",metadata.resourceVersion",
	"metadata.resourceVersion,status.phase",
	"metadata.resourceVersion,status.podIP",
	"metadata.resourceVersion,metadata.labels",
	"metadata.resourceVersion,metadata.annotations",
	"metadata.resourceVersion,status.containerStatuses.ready",
	"metadata.resourceVersion,status.conditions",
	"metadata.resourceVersion,spec.nodeName,status.phase",
	"metadata.resourceVersion,metadata.ownerReferences",
	"metadata.resourceVersion,status.containerStatuses.restartCount,status.containerStatuses.name",
}

// histogram is a log-scaled latency histogram (2% buckets from 1 µs).
type histogram struct{ b [1000]uint32 }

const histBase = 1.02

func (h *histogram) add(d time.Duration) {
	us := max(float64(d)/1e3, 1)
	i := min(int(math.Log(us)/math.Log(histBase)), len(h.b)-1)
	h.b[i]++
}

func (h *histogram) merge(o *histogram) {
	for i, v := range o.b {
		h.b[i] += v
	}
}

func (h *histogram) count() (n uint64) {
	for _, v := range h.b {
		n += uint64(v)
	}
	return n
}

// quantile returns the q-quantile in microseconds (upper bucket bound).
func (h *histogram) quantile(q float64) float64 {
	n := h.count()
	if n == 0 {
		return 0
	}
	want := uint64(math.Ceil(q * float64(n)))
	var seen uint64
	for i, v := range h.b {
		seen += uint64(v)
		if seen >= want {
			return math.Pow(histBase, float64(i+1))
		}
	}
	return math.Inf(1)
}

// watchResult is one watch measurement.
type watchResult struct {
	Impl            string             `json:"impl"`
	Pods            int                `json:"pods"`
	Watchers        int                `json:"watchers"`
	Masks           int                `json:"masks"`
	ChurnPerSec     float64            `json:"churnPerSec"`
	Seconds         float64            `json:"seconds"`
	Updates         int64              `json:"updates"`
	Expected        int64              `json:"expectedEvents"`
	Received        int64              `json:"receivedEvents"`
	Lost            int64              `json:"lostEvents"`
	LostByReading   int64              `json:"lostByReadingWatchers"`
	Dropped         int                `json:"droppedWatchers"`
	DelayMedianUs   float64            `json:"delayMedianUs"`
	DelayP99Us      float64            `json:"delayP99Us"`
	DelayMaxUs      float64            `json:"delayMaxUs"`
	CPUCores        float64            `json:"serverCpuCores"`
	CPUUsPerEvent   float64            `json:"serverCpuUsPerEvent"`
	AllocsPerEvent  float64            `json:"serverAllocsPerEvent"`
	RSSBytes        int64              `json:"serverRssBytes"`
	EncodesPerUpd   float64            `json:"podEncodesPerUpdate"`   // -1 when the counter is absent
	ComputesPerUpd  float64            `json:"viewComputesPerUpdate"` // -1 when the counter is absent
	ComputesByKind  map[string]float64 `json:"viewComputesPerUpdateByKind,omitempty"`
	SnapshotSeconds float64            `json:"snapshotSeconds"`
}

// watcherState is the client side of one watch.
type watcherState struct {
	synced   atomic.Bool
	syncedAt atomic.Int64 // UnixNano of INITIAL_SYNC_COMPLETE
	received atomic.Int64
	err      atomic.Pointer[error]
	mu       sync.Mutex
	hist     histogram
	maxDelay time.Duration
}

// openWatchers opens n watches on socket, one connection per perConn
// watchers, with masks in turn, and returns once all have received their
// initial snapshot (or timeout passes).
func openWatchers(ctx context.Context, socket string, n, perConn int, timeout time.Duration) ([]*watcherState, func(), error) {
	var conns []*grpc.ClientConn
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	ws := make([]*watcherState, n)
	var syncWG sync.WaitGroup
	syncWG.Add(n)
	var conn *grpc.ClientConn
	for i := range n {
		if i%max(perConn, 1) == 0 {
			c, err := grpcConn(socket)
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			conns = append(conns, c)
			conn = c
		}
		w := &watcherState{}
		ws[i] = w
		conn := conn
		mask := WatchMasks[i%len(WatchMasks)]
		go func() {
			once := sync.OnceFunc(syncWG.Done)
			defer once()
			err := runWatcher(ctx, conn, mask, w, once)
			if err != nil && ctx.Err() == nil {
				w.err.Store(&err)
			}
		}()
	}
	done := make(chan struct{})
	go func() { syncWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		return ws, closeAll, fmt.Errorf("watchers not synced after %v", timeout)
	case <-ctx.Done():
		return ws, closeAll, ctx.Err()
	}
	for _, w := range ws {
		if e := w.err.Load(); e != nil {
			return ws, closeAll, fmt.Errorf("watch: %w", *e)
		}
	}
	return ws, closeAll, nil
}

// runWatcher reads one watch until it ends.
func runWatcher(ctx context.Context, conn *grpc.ClientConn, mask string, w *watcherState, synced func()) error {
	s, err := conn.NewStream(withMask(ctx, mask), &grpc.StreamDesc{ServerStreams: true}, methodWatch)
	if err != nil {
		return err
	}
	if err := s.SendMsg([]byte{}); err != nil {
		return err
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	for {
		var msg []byte
		if err := s.RecvMsg(&msg); err != nil {
			return err
		}
		now := time.Now()
		switch varintField(msg, 2) {
		case 4: // INITIAL_SYNC_COMPLETE
			w.syncedAt.Store(now.UnixNano())
			w.synced.Store(true)
			synced()
		case 2: // MODIFIED
			pod, _ := bytesField(msg, 1)
			meta, _ := bytesField(pod, 1)
			ts, err := strconv.ParseInt(stringField(meta, 6), 10, 64)
			if err != nil {
				return fmt.Errorf("event without a timestamp in metadata.resourceVersion: %w", err)
			}
			d := now.Sub(time.Unix(0, ts))
			w.mu.Lock()
			w.hist.add(d)
			w.maxDelay = max(w.maxDelay, d)
			w.mu.Unlock()
			w.received.Add(1)
		}
	}
}

// runWatch measures watchers watching a server with pods pods while the
// server applies churn updates per second for d.
func runWatch(ctx context.Context, o childOptions, impl string, pods, watchers int, churn float64, d time.Duration) (watchResult, error) {
	r := watchResult{Impl: impl, Pods: pods, Watchers: watchers, Masks: min(watchers, len(WatchMasks)), ChurnPerSec: churn}
	c, err := startChild(ctx, o, impl, pods)
	if err != nil {
		return r, err
	}
	defer c.stop()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t0 := time.Now()
	ws, closeAll, err := openWatchers(wctx, c.socket, watchers, 1, 120*time.Second)
	if closeAll != nil {
		defer closeAll()
	}
	if err != nil {
		return r, err
	}
	r.SnapshotSeconds = time.Since(t0).Seconds()
	st0, err := c.stats()
	if err != nil {
		return r, err
	}
	cpu0, _ := childproc.CPU(c.pid())
	start := time.Now()
	if err := c.call(fmt.Sprintf("/churn?rate=%g", churn)); err != nil {
		return r, err
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return r, ctx.Err()
	}
	if err := c.call("/churn?rate=0"); err != nil {
		return r, err
	}
	stopped, err := c.stats()
	if err != nil {
		return r, err
	}
	r.Updates = stopped.Updates - st0.Updates
	// Drain: wait until every live watcher has every event, at most 10 s.
	expect := r.Updates
	drainEnd := time.Now().Add(10 * time.Second)
	for time.Now().Before(drainEnd) {
		behind := false
		for _, w := range ws {
			if w.err.Load() == nil && w.received.Load() < expect {
				behind = true
				break
			}
		}
		if !behind {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(start)
	cpu1, _ := childproc.CPU(c.pid())
	st1, err := c.stats()
	if err != nil {
		return r, err
	}
	r.RSSBytes, _ = childproc.RSS(c.pid())
	r.Seconds = elapsed.Seconds()
	var hist histogram
	var maxDelay time.Duration
	for _, w := range ws {
		got := w.received.Load()
		r.Received += got
		lost := max(expect-got, 0)
		r.Lost += lost
		if w.err.Load() != nil {
			r.Dropped++
		} else {
			r.LostByReading += lost
		}
		w.mu.Lock()
		hist.merge(&w.hist)
		maxDelay = max(maxDelay, w.maxDelay)
		w.mu.Unlock()
	}
	r.Expected = expect * int64(watchers)
	r.DelayMedianUs = hist.quantile(0.5)
	r.DelayP99Us = hist.quantile(0.99)
	r.DelayMaxUs = us(maxDelay)
	r.CPUCores = (cpu1 - cpu0).Seconds() / d.Seconds() // CPU of churn and delivery, over the churn window
	if r.Received > 0 {
		r.CPUUsPerEvent = us(cpu1-cpu0) / float64(r.Received)
		r.AllocsPerEvent = float64(st1.AllocObjects-st0.AllocObjects) / float64(r.Received)
	}
	r.EncodesPerUpd, r.ComputesPerUpd, r.ComputesByKind = -1, -1, nil
	if r.Updates > 0 {
		if v, ok := counterDelta(st0.Counters, st1.Counters, "podsapi_pod_encodes_total"); ok {
			r.EncodesPerUpd = v / float64(r.Updates)
		}
		if v, ok := counterDelta(st0.Counters, st1.Counters, "podsapi_view_computes_total"); ok {
			r.ComputesPerUpd = v / float64(r.Updates)
			r.ComputesByKind = map[string]float64{}
			for k, v1 := range st1.Counters {
				if strings.HasPrefix(k, "podsapi_view_computes_total{") {
					r.ComputesByKind[strings.TrimPrefix(k, "podsapi_view_computes_total")] = (v1 - st0.Counters[k]) / float64(r.Updates)
				}
			}
		}
	}
	return r, nil
}

// counterDelta sums the change of every series of the counter name.
func counterDelta(a, b map[string]float64, name string) (float64, bool) {
	var sum float64
	found := false
	for k, v := range b {
		if k == name || strings.HasPrefix(k, name+"{") {
			sum += v - a[k]
			found = true
		}
	}
	return sum, found
}

// idleResult is the memory of idle watchers.
type idleResult struct {
	Pods           int     `json:"pods"`
	Watchers       int     `json:"watchers"`
	RSS0Bytes      int64   `json:"rssNoWatcherBytes"`
	RSSBytes       int64   `json:"rssWithWatchersBytes"`
	PerWatcherByte float64 `json:"marginalBytesPerIdleWatcher"`
	Heap0Bytes     uint64  `json:"heapNoWatcherBytes"`
	HeapBytes      uint64  `json:"heapWithWatchersBytes"`
	Goroutines0    int     `json:"goroutinesNoWatcher"`
	Goroutines     int     `json:"goroutinesWithWatchers"`
}

// runIdle measures the server's memory with watchers idle watchers (one
// connection each, masks in turn) on pods pods.
func runIdle(ctx context.Context, o childOptions, impl string, pods, watchers int) (idleResult, error) {
	r := idleResult{Pods: pods, Watchers: watchers}
	c, err := startChild(ctx, o, impl, pods)
	if err != nil {
		return r, err
	}
	defer c.stop()
	measure := func() (int64, childStats, error) {
		if err := c.call("/gc"); err != nil {
			return 0, childStats{}, err
		}
		time.Sleep(200 * time.Millisecond)
		st, err := c.stats()
		if err != nil {
			return 0, st, err
		}
		rss, err := childproc.RSS(c.pid())
		return rss, st, err
	}
	// One warm-up watcher, so that the views exist before the baseline: the
	// marginal cost is that of the watchers, not of the views they share.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, closeWarm, err := openWatchers(wctx, c.socket, len(WatchMasks), len(WatchMasks), 60*time.Second)
	if closeWarm != nil {
		closeWarm()
	}
	if err != nil {
		return r, err
	}
	time.Sleep(200 * time.Millisecond)
	rss0, st0, err := measure()
	if err != nil {
		return r, err
	}
	_, closeAll, err := openWatchers(wctx, c.socket, watchers, 1, 120*time.Second)
	if closeAll != nil {
		defer closeAll()
	}
	if err != nil {
		return r, err
	}
	rss1, st1, err := measure()
	if err != nil {
		return r, err
	}
	r.RSS0Bytes, r.RSSBytes = rss0, rss1
	r.PerWatcherByte = float64(rss1-rss0) / float64(watchers)
	r.Heap0Bytes, r.HeapBytes = st0.HeapBytes, st1.HeapBytes
	r.Goroutines0, r.Goroutines = st0.Goroutines, st1.Goroutines
	return r, nil
}

var errSkipped = errors.New("skipped")

// stormResult is one sync storm: watchers starting at once on a large node.
type stormResult struct {
	Impl       string  `json:"impl"`
	Pods       int     `json:"pods"`
	Watchers   int     `json:"watchers"`
	SyncP50Ms  float64 `json:"syncP50Ms"`
	SyncP99Ms  float64 `json:"syncP99Ms"`
	SyncMaxMs  float64 `json:"syncMaxMs"`
	CPUSeconds float64 `json:"serverCpuSeconds"`
}

// runStorm starts watchers watches at once, one connection each, on a
// server with pods pods and no churn, and times each to its
// INITIAL_SYNC_COMPLETE.
func runStorm(ctx context.Context, o childOptions, impl string, pods, watchers int) (stormResult, error) {
	r := stormResult{Impl: impl, Pods: pods, Watchers: watchers}
	c, err := startChild(ctx, o, impl, pods)
	if err != nil {
		return r, err
	}
	defer c.stop()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cpu0, _ := childproc.CPU(c.pid())
	t0 := time.Now()
	ws, closeAll, err := openWatchers(wctx, c.socket, watchers, 1, 120*time.Second)
	if closeAll != nil {
		defer closeAll()
	}
	if err != nil {
		return r, err
	}
	cpu1, _ := childproc.CPU(c.pid())
	times := make([]time.Duration, len(ws))
	for i, w := range ws {
		times[i] = time.Unix(0, w.syncedAt.Load()).Sub(t0)
	}
	slices.Sort(times)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	r.SyncP50Ms = ms(times[len(times)/2])
	r.SyncP99Ms = ms(times[min(len(times)-1, len(times)*99/100)])
	r.SyncMaxMs = ms(times[len(times)-1])
	r.CPUSeconds = (cpu1 - cpu0).Seconds()
	return r, nil
}
