package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/internal/h2c"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
)

// selectorResult is one measurement of issue 16: selective lists, resume
// against resync, memory of the history.
type selectorResult struct {
	Name string `json:"name"`
	// Bytes is the size of the response messages of one operation.
	Bytes float64 `json:"bytes"`
	// NsPerOp is the wall time of one operation, client decoding included.
	NsPerOp float64 `json:"nsPerOp"`
	Ops     int     `json:"ops"`
	// HeapBytes is the heap a structure holds (the history), else 0.
	HeapBytes float64 `json:"heapBytes,omitempty"`
}

// runSelectors measures, in this process, against a real server on a UNIX
// socket in dir, with n bench pods in 10 namespaces: lists selecting
// 100% / 10% / 0% of the pods, each after a change of one pod (so the list is
// assembled again); a watch resumed after 1 and 10 seconds away at 100
// changes/s against a full resync; and the heap of a full default history.
func runSelectors(ctx context.Context, dir string, n int, quick bool) ([]selectorResult, error) {
	reps := 10
	if quick {
		reps = 2
	}
	st := store.New()
	pods := benchPods(n)
	for _, p := range pods {
		st.Upsert(p)
	}
	st.MarkSynced()
	srv, err := server.New(st, server.Config{
		Socket:   filepath.Join(dir, "selectors.sock"),
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registry: prometheus.NewRegistry(),
		Limits:   server.LimitsConfig{QPS: -1},
		Watch:    server.WatchConfig{Queue: 100000},
	})
	if err != nil {
		return nil, err
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx) }()
	defer func() { stop(); <-done }()
	hc := h2c.NewClient(srv.SocketPath())
	defer hc.CloseIdleConnections()
	c := podsv1alpha1connect.NewPodsClient(hc, h2c.BaseURL, connect.WithGRPC(), connect.WithReadMaxBytes(64<<20))

	var out []selectorResult
	k := 0
	change := func() {
		k++
		p := pods[rand.IntN(len(pods))].DeepCopy()
		p.ResourceVersion = strconv.Itoa(k + 1)
		st.Upsert(p)
	}
	for _, l := range []struct {
		name string
		req  *podsv1alpha1.PodListRequest
	}{
		{"list: every pod", &podsv1alpha1.PodListRequest{}},
		{"list: namespace (10%)", &podsv1alpha1.PodListRequest{Namespace: "ns-03"}},
		{"list: label + field selector (10%)", &podsv1alpha1.PodListRequest{LabelSelector: "tier=web", FieldSelector: "metadata.namespace=ns-03,status.phase=Running"}},
		{"list: selector matching no pod", &podsv1alpha1.PodListRequest{LabelSelector: "tier=none"}},
	} {
		r := selectorResult{Name: l.name}
		var total time.Duration
		for range reps {
			change()
			start := time.Now()
			resp, err := c.ListPods(ctx, connect.NewRequest(l.req))
			if err != nil {
				return out, fmt.Errorf("%s: %w", l.name, err)
			}
			total += time.Since(start)
			r.Bytes = float64(proto.Size(resp.Msg))
			r.Ops++
		}
		r.NsPerOp = float64(total.Nanoseconds()) / float64(r.Ops)
		out = append(out, r)
	}

	for _, away := range []int{1, 10} {
		for _, resume := range []bool{true, false} {
			r := selectorResult{Name: fmt.Sprintf("watch after %d s away at 100 changes/s: resync", away)}
			if resume {
				r.Name = fmt.Sprintf("watch after %d s away at 100 changes/s: resume", away)
			}
			var total time.Duration
			for range max(reps/2, 1) {
				v, _ := st.List()
				rev := st.Revision(v)
				for range away * 100 {
					change()
				}
				req := &podsv1alpha1.PodWatchRequest{}
				if resume {
					req.ResumeFrom = rev
				}
				start := time.Now()
				size, err := watchSync(ctx, c, req)
				if err != nil {
					return out, fmt.Errorf("%s: %w", r.Name, err)
				}
				total += time.Since(start)
				r.Bytes = float64(size)
				r.Ops++
			}
			r.NsPerOp = float64(total.Nanoseconds()) / float64(r.Ops)
			out = append(out, r)
		}
	}

	out = append(out, historyHeap(n))
	return out, nil
}

// watchSync opens a watch, reads it to INITIAL_SYNC_COMPLETE and returns the
// bytes of the events received.
func watchSync(ctx context.Context, c podsv1alpha1connect.PodsClient, req *podsv1alpha1.PodWatchRequest) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := c.WatchPods(ctx, connect.NewRequest(req))
	if err != nil {
		return 0, err
	}
	defer s.Close()
	size := 0
	for s.Receive() {
		size += proto.Size(s.Msg())
		if s.Msg().GetType() == podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE {
			return size, nil
		}
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("the watch ended before INITIAL_SYNC_COMPLETE")
}

// historyHeap measures the heap a full history of the default size holds at
// n pods changed in turn: a store with it minus a store without.
func historyHeap(n int) selectorResult {
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	fill := func(opts ...store.Option) (*store.Store, int64) {
		pods := benchPods(n)
		before := heap()
		st := store.New(opts...)
		for _, p := range pods {
			st.Upsert(p)
		}
		for k := range store.DefaultHistory {
			p := pods[k%len(pods)].DeepCopy()
			p.ResourceVersion = strconv.Itoa(k + 2)
			st.Upsert(p)
		}
		return st, int64(heap()) - int64(before)
	}
	with, withBytes := fill()
	without, withoutBytes := fill(store.WithHistory(-1, -1))
	events, counted := with.HistoryLen()
	runtime.KeepAlive(without)
	return selectorResult{
		Name:      fmt.Sprintf("history: %d changes (default), bytes counted against --watch-history-bytes", events),
		Bytes:     float64(counted),
		HeapBytes: float64(withBytes - withoutBytes),
		Ops:       1,
	}
}

// selectorsTable formats the selector measurements.
func selectorsTable(r *Results) string {
	if len(r.Selectors) == 0 {
		return "(not measured)\n"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "| measurement (%d pods, in process) | bytes | time/op | heap |\n|---|---:|---:|---:|\n", r.Options.SelectorPods)
	for _, s := range r.Selectors {
		heap, t := "", fmtUs(s.NsPerOp/1e3)
		if s.HeapBytes != 0 {
			heap, t = fmtBytes(s.HeapBytes), ""
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %s |\n", s.Name, fmtBytes(s.Bytes), t, heap)
	}
	return sb.String()
}
