package stress

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/podsapi/podsapi/errinfo"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/podcgroup"
)

// watchesPerConn is how many watches the herds open per connection, under
// the server's --max-streams.
const watchesPerConn = 90

// herdResult is what one herd of watchers did.
type herdResult struct {
	synced, failed int
	took           time.Duration
	// reasons counts the failures by code and ErrorInfo reason.
	reasons map[string]int
}

// runHerd opens n watches at once (resuming from rev when it is not empty)
// and waits until each has received INITIAL_SYNC_COMPLETE or failed, or
// timeout passed; the watches are closed when it returns.
func runHerd(ctx context.Context, socket string, n int, rev string, timeout time.Duration) herdResult {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var clients []podsv1alpha1connect.PodsClient
	for range (n + watchesPerConn - 1) / watchesPerConn {
		c, closeConns := newClient(socket, connect.WithCodec(typeOnlyCodec{}))
		defer closeConns()
		clients = append(clients, c)
	}
	var synced, failed atomic.Int64
	var mu sync.Mutex
	reasons := map[string]int{}
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			s, err := clients[i/watchesPerConn].WatchPods(ctx, connect.NewRequest(&podsv1alpha1.PodWatchRequest{ResumeFrom: rev}))
			if err == nil {
				defer s.Close()
				for s.Receive() {
					if s.Msg().GetType() == podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE {
						synced.Add(1)
						return
					}
				}
				err = s.Err()
			}
			if err == nil {
				err = errors.New("the watch ended before its sync marker")
			}
			failed.Add(1)
			mu.Lock()
			reasons[connect.CodeOf(err).String()+" "+errinfo.Reason(err)]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return herdResult{int(synced.Load()), int(failed.Load()), time.Since(start), reasons}
}

// sampler samples the child's RSS and the bytes counted against its memory
// budget until stopped, and keeps the peaks.
type sampler struct {
	stop             chan struct{}
	done             chan struct{}
	rssPeak, usePeak int64
	// queuedPeak is the peak of the queued events, which the budget
	// counts but --watch-queue bounds: usePeak leaves them out.
	queuedPeak int64
	// clients is the peak of each client's watches, by the name the
	// server gives it (podsapi_client_watches).
	clients map[string]float64
}

func startSampler(c *child) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{}), clients: map[string]float64{}}
	go func() {
		defer close(s.done)
		for {
			s.rssPeak = max(s.rssPeak, c.rss())
			if used, err := c.metricSeries("podsapi_memory_used_bytes", "kind"); err == nil {
				var sum float64
				for kind, v := range used {
					if kind != "queued" {
						sum += v
					}
				}
				s.usePeak = max(s.usePeak, int64(sum))
				s.queuedPeak = max(s.queuedPeak, int64(used["queued"]))
			}
			if by, err := c.metricSeries("podsapi_client_watches", "client"); err == nil {
				for client, n := range by {
					s.clients[client] = max(s.clients[client], n)
				}
			}
			select {
			case <-s.stop:
				return
			case <-time.After(100 * time.Millisecond): // sampling, not synchronisation
			}
		}
	}()
	return s
}

func (s *sampler) end() *sampler {
	close(s.stop)
	<-s.done
	return s
}

// startBudgeted starts the stress server with args, reports its memory
// limit in the rows of scenario, and returns it with its memory budget.
func startBudgeted(scenario string, rep *Report, args ...string) (*child, float64, error) {
	c, err := startChild(args...)
	if err != nil {
		return nil, 0, err
	}
	rep.add(scenario, "memory limit of the server", true, limit.Note, "reported")
	budget, err := c.metric("podsapi_memory_budget_bytes")
	if err != nil {
		c.kill()
		return nil, 0, err
	}
	return c, budget, nil
}

// resumeHerd is issue 25's findings 1 and 2: a herd of watchers resuming
// 1,000 changes back under churn must reach INITIAL_SYNC_COMPLETE, every
// one of them and at least as well as the same herd watching afresh,
// within the memory budget. The herds are this process, one client; the
// victim (victim.go) is another, a pod, whose reader must receive every
// change and whose calls and watches must be served as well as before the
// herds. The herds are not confined to attackerCPU: reading 1,000
// snapshots of 2.4 MB takes this process about half a CPU, and confined to
// it the herds take longer than the server keeps their replays.
func resumeHerd(ctx context.Context, o Options, rep *Report) error {
	const name = "6 resume herd"
	c, budget, err := startBudgeted(name, rep, "--padding", "2048", "--qps", "-1", "--pods", fmt.Sprint(o.HerdPods))
	if err != nil {
		return err
	}
	defer c.kill()
	v, err := startVictim(ctx, c, o.VictimInterval, true)
	if err != nil {
		return err
	}
	defer v.kill()
	changes := 0
	var lost int
	// churn makes n changes at rate and returns the reader's delivery
	// latencies once it got them.
	churn := func(n, rate int) ([]time.Duration, error) {
		if err := c.churn(n, rate); err != nil {
			return nil, err
		}
		changes += n
		got, err := v.readerGot(changes)
		lost = changes - got.Modified + got.Gaps
		return got.Delivery, err
	}
	// The history the herd resumes from: o.HerdBack changes, the victim's
	// quiet baseline.
	if err := v.start(); err != nil {
		return err
	}
	base, err := churn(o.HerdBack, o.HerdChurn)
	if err != nil {
		return err
	}
	quiet, err := v.end()
	if err != nil {
		return err
	}
	cl, closeConns := newClient(c.socket)
	defer closeConns()
	revision := func() (string, error) {
		list, err := cl.ListPods(ctx, connect.NewRequest(&podsv1alpha1.PodListRequest{}))
		if err != nil {
			return "", err
		}
		if list.Msg.GetRevision() == "" {
			return "", errors.New("ListPods answered no revision to resume from")
		}
		return list.Msg.GetRevision(), nil
	}
	// The same churn during each herd: o.HerdBack changes at o.HerdChurn
	// per second.
	var under victimOutcome
	// The server's CPU seconds and GC cycles during the herds: what it
	// spends serving them, and at what memory pressure.
	var cpuSecs, gcs [2]float64
	herd := func(rev string) (herdResult, *sampler, []time.Duration, error) {
		if _, err := churn(o.HerdBack, 10*o.HerdChurn); err != nil { // the resume point is o.HerdBack changes back
			return herdResult{}, nil, nil, err
		}
		if err := v.start(); err != nil {
			return herdResult{}, nil, nil, err
		}
		n := o.HerdBack // as many changes again during the herd
		churned := make(chan error, 1)
		go func() { churned <- c.churn(n, o.HerdChurn) }()
		i := 0
		if rev != "" {
			i = 1
		}
		cpu0, _ := c.metric("process_cpu_seconds_total")
		gc0, _ := c.metric("go_gc_duration_seconds")
		s := startSampler(c)
		res := runHerd(ctx, c.socket, o.Herd, rev, o.HerdTimeout)
		s.end()
		cpu1, err := c.metric("process_cpu_seconds_total")
		if err != nil {
			fmt.Fprintf(o.Log, "stress: resume: server CPU: %v\n", err)
		}
		gc1, _ := c.metric("go_gc_duration_seconds")
		cpuSecs[i], gcs[i] = (cpu1-cpu0)/max(res.took.Seconds(), 1e-3), gc1-gc0
		if err := <-churned; err != nil {
			return res, s, nil, err
		}
		out, err := v.end()
		if err != nil {
			return res, s, nil, err
		}
		under.Lists = mergeStats(under.Lists, out.Lists)
		under.Watches = mergeStats(under.Watches, out.Watches)
		changes += n
		got, err := v.readerGot(changes)
		lost = changes - got.Modified + got.Gaps
		return res, s, got.Delivery, err
	}
	fresh, fs, fl, err := herd("")
	if err != nil {
		return err
	}
	// Resume from o.HerdBack changes back, after the fresh herd's churn.
	rev, err := revision()
	if err != nil {
		return err
	}
	resumed, rs, rl, err := herd(rev)
	if err != nil {
		return err
	}
	if err := v.close(); err != nil {
		return err
	}
	herdRow := func(r herdResult) string {
		s := fmt.Sprintf("%d of %d synced in %v", r.synced, o.Herd, r.took.Round(time.Millisecond))
		for reason, n := range r.reasons {
			s += fmt.Sprintf("; %d %s", n, reason)
		}
		return s
	}
	rep.add(name, fmt.Sprintf("fresh herd of %d, %d pods of 2.4 KB, %d changes/s", o.Herd, o.HerdPods, o.HerdChurn), true, herdRow(fresh), "reported")
	rep.add(name, fmt.Sprintf("herd of %d resuming %d changes back, %d changes/s", o.Herd, o.HerdBack, o.HerdChurn),
		resumed.synced == o.Herd && resumed.synced >= fresh.synced, herdRow(resumed), fmt.Sprintf("all, and >= fresh (%d)", fresh.synced))
	rep.add(name, "server RSS peak fresh / resumed", true, fmt.Sprintf("%s / %s", mib(fs.rssPeak), mib(rs.rssPeak)), "reported")
	rep.add(name, "server CPU and GC cycles during the herd, fresh / resumed", true,
		fmt.Sprintf("%.2f / %.2f cores; %.0f / %.0f GCs", cpuSecs[0], cpuSecs[1], gcs[0], gcs[1]), "reported")
	rep.add(name, "memory budget used, peak fresh / resumed (queued events beside)", max(fs.usePeak, rs.usePeak) <= int64(budget),
		fmt.Sprintf("%s / %s (%s / %s)", mib(fs.usePeak), mib(rs.usePeak), mib(fs.queuedPeak), mib(rs.queuedPeak)), fmt.Sprintf("<= budget %s", mib(int64(budget))))
	// The herd and the victim are two clients to the server: the victim's
	// reader holds its one watch under the victim's name, the herd its
	// watches under another.
	victimName := podcgroup.Client(victimCgroup)
	herdClient, herdPeak := "", 0.0
	for client, n := range rs.clients {
		if client != victimName && n > herdPeak {
			herdClient, herdPeak = client, n
		}
	}
	// The herd's first watches may sync and leave before its last ones
	// are open: most of it, not all, is open at once.
	rep.add(name, "peak watches per client during the resumed herd, as the server names them", rs.clients[victimName] >= 1 && herdPeak >= float64(o.Herd)/2,
		fmt.Sprintf("%s %.0f, %s %.0f", victimName, rs.clients[victimName], herdClient, herdPeak), "the victim apart from the herd, half the herd at least at once")
	rep.add(name, "events lost by the victim's reader", lost == 0, fmt.Sprint(lost), "0")
	pq, pf, pr := p99(base), p99(fl), p99(rl)
	rep.add(name, "victim's reader delivery p99 quiet / fresh herd / resume herd", true,
		fmt.Sprintf("%v / %v / %v", pq.Round(time.Microsecond), pf.Round(time.Microsecond), pr.Round(time.Microsecond)), "reported")
	victimRows(rep, name, quiet, under, "")
	return nil
}

// maskAttack is issue 25's finding 3: ListPods and WatchPods with 32
// distinct field masks, each keeping the pods' large annotations, over a
// store of 10 MB. The caches keep at most the memory budget; every list is
// answered whole and every watch syncs; the victim (victim.go), another
// client, is served meanwhile as before.
func maskAttack(ctx context.Context, o Options, rep *Report) error {
	const name = "7 distinct masks"
	c, budget, err := startBudgeted(name, rep, "--padding", fmt.Sprint(o.MaskPadding))
	if err != nil {
		return err
	}
	defer c.kill()
	heap := func() (int64, error) {
		if err := c.gc(); err != nil {
			return 0, err
		}
		v, err := c.metric("go_memstats_heap_alloc_bytes")
		return int64(v), err
	}
	before, err := heap()
	if err != nil {
		return err
	}
	v, quiet, err := startQuietVictim(ctx, c, o)
	if err != nil {
		return err
	}
	defer v.kill()
	rssBefore := c.rss()
	fields := []string{"metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels", "spec.nodeName"}
	masks := make([]string, 1<<len(fields))
	for set := range masks {
		paths := []string{"metadata.annotations"}
		for i, p := range fields {
			if set&(1<<i) != 0 {
				paths = append(paths, p)
			}
		}
		masks[set] = strings.Join(paths, ",")
	}
	cl, closeConns := newClient(c.socket)
	defer closeConns()
	whole := 0
	s := startSampler(c)
	if err := v.start(); err != nil {
		return err
	}
	meter := meterCPU(c, selfCPU)
	for _, m := range masks {
		for {
			req := connect.NewRequest(&podsv1alpha1.PodListRequest{})
			req.Header().Set("x-kubernetes-fieldmask", m)
			resp, err := cl.ListPods(ctx, req)
			if connect.CodeOf(err) == connect.CodeResourceExhausted {
				continue // the rate limit: the refusal waited --rate-limit-delay
			}
			if err == nil && len(resp.Msg.GetPods()) == childPods && len(resp.Msg.GetPods()[0].GetMetadata().GetAnnotations()["padding"]) == o.MaskPadding {
				whole++
			}
			break
		}
	}
	afterLists, err := heap()
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	synced := 0
	for _, m := range masks {
		req := connect.NewRequest(&podsv1alpha1.PodWatchRequest{})
		req.Header().Set("x-kubernetes-fieldmask", m)
		st, err := cl.WatchPods(wctx, req)
		if err != nil {
			continue
		}
		defer st.Close()
		for st.Receive() {
			if st.Msg().GetType() == podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE {
				synced++
				break
			}
		}
	}
	meter.row(rep, name)
	under, err := v.finish()
	if err != nil {
		return err
	}
	afterWatches, err := heap()
	if err != nil {
		return err
	}
	s.end()
	store := int64(childPods * o.MaskPadding)
	rep.add(name, fmt.Sprintf("ListPods with %d masks answered whole (store %s)", len(masks), mib(store)), whole == len(masks), fmt.Sprintf("%d of %d", whole, len(masks)), "all")
	rep.add(name, fmt.Sprintf("WatchPods with %d masks synced", len(masks)), synced == len(masks), fmt.Sprintf("%d of %d", synced, len(masks)), "all")
	rep.add(name, "memory budget used, peak", s.usePeak <= int64(budget), mib(s.usePeak), fmt.Sprintf("<= budget %s", mib(int64(budget))))
	limitHeap := before + int64(budget) + 16<<20
	rep.add(name, "server live heap before / after lists / after watches", max(afterLists, afterWatches) <= limitHeap,
		fmt.Sprintf("%s / %s / %s", mib(before), mib(afterLists), mib(afterWatches)), fmt.Sprintf("<= %s (before + budget + 16 MiB)", mib(limitHeap)))
	rep.add(name, "server RSS before / peak", true, fmt.Sprintf("%s / %s", mib(rssBefore), mib(s.rssPeak)), "reported")
	victimRows(rep, name, quiet, under, "")
	return nil
}

// typeOnlyCodec decodes of a PodWatchResponse its type alone, and leaves
// the responses of ListPods and GetPod undecoded, so that the herd's
// clients, many in one process, and the victim cost the node little more
// than reading their bytes: what is measured is the server's work.
type typeOnlyCodec struct{}

func (typeOnlyCodec) Name() string { return "proto" }

func (typeOnlyCodec) Marshal(msg any) ([]byte, error) { return proto.Marshal(msg.(proto.Message)) }

func (typeOnlyCodec) Unmarshal(b []byte, msg any) error {
	var m *podsv1alpha1.PodWatchResponse
	switch msg := msg.(type) {
	case *podsv1alpha1.PodWatchResponse:
		m = msg
	case *podsv1alpha1.PodListResponse, *podsv1alpha1.PodGetResponse:
		return nil
	default:
		return proto.Unmarshal(b, msg.(proto.Message))
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if num == 2 && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			m.Type = podsv1alpha1.EventType(v)
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
	}
	return nil
}
