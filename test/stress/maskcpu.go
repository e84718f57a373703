package stress

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/podsapi/podsapi/errinfo"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
)

// maskCPUFields are the fields the attack's masks are made of: every
// non-empty subset is a distinct mask (1,023 of them). A watch's mask
// always keeps the pod's namespace, name and UID, so these are others.
var maskCPUFields = []string{"metadata.labels", "metadata.resourceVersion", "metadata.creationTimestamp", "spec.nodeName", "spec.containers",
	"spec.restartPolicy", "status.phase", "status.podIP", "status.hostIP", "status.conditions"}

// maskCPU is issue 25's finding 6c: one client opens o.MaskWatches (900)
// watches, each with a distinct small field mask, under 100 changes a
// second; every
// distinct mask costs a projection of every change. The server takes
// DefaultMasksPerClient (32) distinct masks of one client and refuses the
// others TOO_MANY_MASKS, so the attack costs the CPU of 32 masks (0.55 to
// 1.27 cores before the bound, on 86fafe7). The baseline is the same churn
// with only a reading watcher of this process (one of those 32 masks) and
// the victim.
func maskCPU(ctx context.Context, o Options, rep *Report) error {
	const name = "8 distinct-mask CPU"
	c, err := startChild("--pods", fmt.Sprint(o.MaskPods), "--padding", "1024", "--rate-limit-delay", o.RateLimitDelay.String())
	if err != nil {
		return err
	}
	defer c.kill()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reader := startReader(wctx, c.socket)
	select {
	case <-reader.synced:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("the reader did not sync: %v", reader.endErr())
	}
	// The victim, another client, calls through both churns, so that the
	// server's CPU of each counts its calls alike.
	v, err := startVictim(ctx, c, o.VictimInterval, false)
	if err != nil {
		return err
	}
	defer v.kill()
	changes := 0
	churn := func() (cores float64, err error) {
		n, rate := o.MaskChanges, 100
		before, err := c.metric("process_cpu_seconds_total")
		if err != nil {
			return 0, err
		}
		start := time.Now()
		if err := c.churn(n, rate); err != nil {
			return 0, err
		}
		changes += n
		reader.waitModified(changes, time.Minute)
		after, err := c.metric("process_cpu_seconds_total")
		return (after - before) / time.Since(start).Seconds(), err
	}
	if err := v.start(); err != nil {
		return err
	}
	quiet, err := churn()
	if err != nil {
		return err
	}
	baseLatency := reader.takeLatencies()
	quietV, err := v.end()
	if err != nil {
		return err
	}
	if err := v.start(); err != nil {
		return err
	}

	// The attack: watches with distinct masks, on connections of
	// watchesPerConn streams, each read (and discarded) as it comes.
	var mu sync.Mutex
	reasons := map[string]int{}
	synced := 0
	var wg sync.WaitGroup
	var clients []func()
	defer func() {
		cancel()
		wg.Wait()
		for _, f := range clients {
			f()
		}
	}()
	ready := make(chan struct{}, o.MaskWatches)
	for i := range o.MaskWatches {
		if i%watchesPerConn == 0 {
			cl, closeConns := newClient(c.socket, connect.WithCodec(typeOnlyCodec{}))
			clients = append(clients, closeConns)
			for j := i; j < min(i+watchesPerConn, o.MaskWatches); j++ {
				var paths []string
				for b, f := range maskCPUFields {
					if (j+1)&(1<<b) != 0 {
						paths = append(paths, f)
					}
				}
				wg.Go(func() {
					req := connect.NewRequest(&podsv1alpha1.PodWatchRequest{})
					req.Header().Set("x-kubernetes-fieldmask", strings.Join(paths, ","))
					told := false // ready is told once per watch
					s, err := cl.WatchPods(wctx, req)
					if err == nil {
						defer s.Close()
						for s.Receive() {
							if !told && s.Msg().GetType() == podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE {
								mu.Lock()
								synced++
								mu.Unlock()
								told = true
								ready <- struct{}{}
							}
						}
						err = s.Err()
					}
					if wctx.Err() != nil {
						return
					}
					mu.Lock()
					reasons[connect.CodeOf(err).String()+" "+errinfo.Reason(err)]++
					mu.Unlock()
					if !told {
						ready <- struct{}{}
					}
				})
			}
		}
	}
	for range o.MaskWatches {
		select {
		case <-ready:
		case <-time.After(2 * time.Minute):
			return fmt.Errorf("the attack's watches did not all sync or end within 2 minutes")
		}
	}
	attacked, err := churn()
	if err != nil {
		return err
	}
	attackLatency := reader.takeLatencies()
	underV, err := v.finish()
	if err != nil {
		return err
	}
	victimRows(rep, name, quietV, underV, "")
	mu.Lock()
	value := fmt.Sprintf("%d synced", synced)
	for r, n := range reasons {
		value += fmt.Sprintf("; %d %s", n, r)
	}
	mu.Unlock()
	rep.add(name, fmt.Sprintf("%d watches of one client with distinct masks", o.MaskWatches), synced <= 32 && reasons["resource_exhausted "+errinfo.TooManyMasks] == o.MaskWatches-synced,
		value, "<= 32 synced, the others TOO_MANY_MASKS")
	rep.add(name, "server CPU at 100 changes/s, quiet / under the attack", attacked <= quiet+0.3,
		fmt.Sprintf("%.2f / %.2f cores", quiet, attacked), "<= quiet + 0.3 core")
	reader.mu.Lock()
	lost := changes - reader.modified + reader.gaps
	reader.mu.Unlock()
	rep.add(name, "events lost by a reading watcher of the attacker's client", lost == 0, fmt.Sprint(lost), "0")
	rep.add(name, "that watcher's delivery p99 quiet / under the attack", true,
		fmt.Sprintf("%v / %v", p99(baseLatency).Round(time.Microsecond), p99(attackLatency).Round(time.Microsecond)), "reported")
	return nil
}
