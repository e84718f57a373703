package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// The measurements of issue 16 (selectors and resume), as Go benchmarks of a
// real server on a UNIX socket in this process, at 1000 pods in 10
// namespaces (benchPods). Run them with
//
//	go test -run '^$' -bench 'Selective|Resume|HistoryMemory' -benchtime 20x ./test/bench
//
// docs/benchmarks-selectors.md holds their results.

// selectorServer serves n bench pods from a store made with opts.
func selectorServer(b *testing.B, n int, opts ...store.Option) (*store.Store, podsv1alpha1connect.PodsClient) {
	b.Helper()
	st := store.New(opts...)
	for _, p := range benchPods(n) {
		st.Upsert(p)
	}
	st.MarkSynced()
	srv := podstest.Start(b, st, server.Config{Limits: server.LimitsConfig{QPS: -1}, Watch: server.WatchConfig{Queue: 100000}})
	return st, podstest.ConnectClient(b, srv.SocketPath(), connect.WithReadMaxBytes(64<<20))
}

// BenchmarkSelectiveList lists 1000 pods whole and through selectors, from
// the cache of an unchanged store ("cached") and after a change of one pod
// before each list ("changed", the list is assembled again). bytes/op is
// the size of the response.
func BenchmarkSelectiveList(b *testing.B) {
	cases := []struct {
		name string
		req  *podsv1alpha1.PodListRequest
	}{
		{"full", &podsv1alpha1.PodListRequest{}},
		{"namespace-10pct", &podsv1alpha1.PodListRequest{Namespace: "ns-03"}},
		{"label+field-10pct", &podsv1alpha1.PodListRequest{LabelSelector: "tier=web,app.kubernetes.io/name=web", FieldSelector: "metadata.namespace=ns-03,status.phase=Running"}},
		{"matches-none", &podsv1alpha1.PodListRequest{LabelSelector: "tier=none"}},
	}
	for _, mode := range []string{"cached", "changed"} {
		for _, tc := range cases {
			b.Run(mode+"/"+tc.name, func(b *testing.B) {
				st, c := selectorServer(b, 1000)
				pods := benchPods(1000)
				ctx := context.Background()
				size := 0
				k := 0
				b.ReportAllocs()
				for b.Loop() {
					if mode == "changed" {
						k++
						p := pods[k%len(pods)].DeepCopy()
						p.ResourceVersion = strconv.Itoa(k + 1)
						st.Upsert(p)
					}
					resp, err := c.ListPods(ctx, connect.NewRequest(tc.req))
					if err != nil {
						b.Fatal(err)
					}
					size = proto.Size(resp.Msg)
				}
				b.ReportMetric(float64(size), "resp-bytes/op")
			})
		}
	}
}

// watchUntilSynced opens a watch and reads it up to INITIAL_SYNC_COMPLETE,
// returning the bytes of the events received.
func watchUntilSynced(b *testing.B, c podsv1alpha1connect.PodsClient, req *podsv1alpha1.PodWatchRequest) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := c.WatchPods(ctx, connect.NewRequest(req))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	size := 0
	for s.Receive() {
		size += proto.Size(s.Msg())
		if s.Msg().GetType() == podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE {
			return size
		}
	}
	b.Fatal(s.Err())
	return 0
}

// BenchmarkResume measures a client that was disconnected while 100 pods
// per second changed (random pods out of 1000): resuming from its last
// revision against a full resync (a new watch and its snapshot), from the
// request to INITIAL_SYNC_COMPLETE, after 1 and 10 seconds away, for a
// client of every pod and for one of a namespace (10% of the pods).
func BenchmarkResume(b *testing.B) {
	const pods, rate = 1000, 100
	for _, away := range []int{1, 10} {
		for _, ns := range []string{"", "ns-03"} {
			for _, mode := range []string{"resume", "resync"} {
				name := fmt.Sprintf("away-%ds/all/%s", away, mode)
				if ns != "" {
					name = fmt.Sprintf("away-%ds/namespace/%s", away, mode)
				}
				b.Run(name, func(b *testing.B) {
					st, c := selectorServer(b, pods)
					all := benchPods(pods)
					rng := rand.New(rand.NewPCG(1, 2))
					size, k := 0, 0
					b.ReportAllocs()
					for b.Loop() {
						b.StopTimer()
						v, _ := st.List()
						rev := st.Revision(v)
						for range away * rate {
							k++
							p := all[rng.IntN(pods)].DeepCopy()
							p.ResourceVersion = strconv.Itoa(k + 1)
							st.Upsert(p)
						}
						b.StartTimer()
						req := &podsv1alpha1.PodWatchRequest{Namespace: ns}
						if mode == "resume" {
							req.ResumeFrom = rev
						}
						size = watchUntilSynced(b, c, req)
					}
					b.ReportMetric(float64(size), "resp-bytes/op")
				})
			}
		}
	}
}

// BenchmarkHistoryMemory measures the heap a full history of the default
// size holds, at 1000 pods: DefaultHistory changes, against a store that
// keeps no history.
func BenchmarkHistoryMemory(b *testing.B) {
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	fill := func(opts ...store.Option) (*store.Store, uint64) {
		all := benchPods(1000)
		before := heap()
		st := store.New(opts...)
		for _, p := range all {
			st.Upsert(p)
		}
		for k := range store.DefaultHistory {
			p := all[k%len(all)].DeepCopy()
			p.ResourceVersion = strconv.Itoa(k + 2)
			st.Upsert(p)
		}
		return st, heap() - before
	}
	for b.Loop() {
		with, withBytes := fill()
		without, withoutBytes := fill(store.WithHistory(-1, -1))
		events, counted := with.HistoryLen()
		b.ReportMetric(float64(withBytes-withoutBytes)/(1<<20), "history-MiB")
		b.ReportMetric(float64(counted)/(1<<20), "counted-MiB")
		b.ReportMetric(float64(events), "events")
		runtime.KeepAlive(with)
		runtime.KeepAlive(without)
	}
}
