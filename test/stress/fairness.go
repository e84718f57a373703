package stress

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"connectrpc.com/connect"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/test/childproc"
)

// The fairness scenario: two root clients, told apart by their cgroups.
const (
	// roleRootAttacker is the role of the attacking client's process.
	roleRootAttacker = "stress-root-attacker"
	// fairShare is the server's --max-watchers-per-client in the scenario:
	// the attacker holds all of its share.
	fairShare = 100
	// fairLoopers are the attacker's goroutines that loop watches beyond
	// its share and ListPods beyond its rate.
	fairLoopers = 8
	// fairClientQPS is the server's --per-client-qps in the scenario, and
	// fairQPS its --qps: the attacker's share and the victim's calls (at
	// most 50 a second) fit in the shared bucket.
	fairClientQPS = 60
	fairQPS       = 150
	// fairAttackerCgroup is the cgroup the server reads for the attacker
	// (a systemd service; the victim's is victimCgroup, a pod's).
	fairAttackerCgroup = "0::/system.slice/attacker.service\n"
)

// fairness checks that a root client cannot take the shares of another
// root client (issue 25, finding 7): the server tells them apart by their
// cgroups, read from /proc/PID/cgroup of the PID their connection's peer
// credentials name (under --host-proc: a directory the harness writes, see
// child.identify, so that it runs without creating cgroups). The attacker, a process of a
// systemd unit, holds every watch its share allows (fairShare) and loops,
// on fairLoopers goroutines, watches beyond its share and ListPods beyond
// its rate (--per-client-qps fairClientQPS), confined to attackerCPU; the
// victim (victim.go), a process in a pod, calls ListPods and opens a watch
// every VictimInterval for LockoutDuration, as it did alone before the
// attack (its quiet baseline, half as long). Before the shares were per
// client they were per UID: the victim got none of its watches.
func fairness(ctx context.Context, o Options, rep *Report) error {
	return rootClients(ctx, o, rep, "6 root clients", fairShare)
}

// snapshots checks that snapshot work is shared fairly between clients
// (issue 25, finding 6): the same two root clients, the attacker holding no
// watch but looping full watches (a snapshot of 50 pods of 48 KB, 2.4 MB,
// each) on fairLoopers goroutines; its snapshots are sent one at a time,
// behind each other, the victim's beside them.
func snapshots(ctx context.Context, o Options, rep *Report) error {
	return rootClients(ctx, o, rep, "7 snapshot loop", 0, "--padding", fmt.Sprint(48<<10))
}

// rootClients runs the scenario of two root clients, the attacker holding
// held watches; args are more flags of the server.
func rootClients(ctx context.Context, o Options, rep *Report, name string, held int, args ...string) error {
	c, err := startChild(append([]string{"--max-watchers-per-client", fmt.Sprint(fairShare),
		"--per-client-qps", fmt.Sprint(fairClientQPS), "--qps", fmt.Sprint(fairQPS), "--rate-limit-delay", o.RateLimitDelay.String()}, args...)...)
	if err != nil {
		return err
	}
	defer c.kill()
	v, err := startVictim(ctx, c, o.VictimInterval, false)
	if err != nil {
		return err
	}
	defer v.kill()
	quiet, err := v.quiet(o.LockoutDuration / 2)
	if err != nil {
		return err
	}
	rssBefore := c.rss()

	cpu := newCPULimit(attackerCPU)
	defer cpu.remove()
	a, err := startRootAttacker(ctx, c, cpu, held, 2*o.LockoutDuration+time.Minute)
	if err != nil {
		return err
	}
	defer a.kill()
	cpuBefore, _ := c.metric("process_cpu_seconds_total")
	attacked, err := v.quiet(o.LockoutDuration)
	if err != nil {
		return err
	}
	cpuAfter, _ := c.metric("process_cpu_seconds_total")
	rssPeak := c.rss()
	res, err := a.stop()
	if err != nil {
		return err
	}
	if err := v.close(); err != nil {
		return err
	}

	elapsed := max(res.Elapsed.Seconds(), 1e-3)
	if held > 0 {
		rep.add(name, "attacker's watches held (its share)", res.Held == held, fmt.Sprint(res.Held), fmt.Sprint(held))
		// Refused watches wait the tarpit's delay (100 ms) on each looper.
		refusedRate := float64(res.WatchesRefused) / elapsed
		rep.add(name, "attacker's refused watches per second (tarpitted)", res.WatchesRefused > 0 && (o.RateLimitDelay < 0 || refusedRate <= 2*fairLoopers*10),
			fmt.Sprintf("%.0f/s (%d)", refusedRate, res.WatchesRefused), fmt.Sprintf("> 0, <= %d/s", 2*fairLoopers*10))
	} else {
		rep.add(name, "attacker's snapshots per second (reported)", true,
			fmt.Sprintf("%.0f/s (%d)", float64(res.WatchesSynced)/elapsed, res.WatchesSynced), "")
	}
	victimRows(rep, name, quiet, attacked, cpu.Note)
	rep.add(name, "server CPU and RSS under the attack (reported)", true,
		fmt.Sprintf("%.2f cores; RSS %d → %d MiB", (cpuAfter-cpuBefore)/o.LockoutDuration.Seconds(), rssBefore>>20, rssPeak>>20), "")
	return nil
}

// rootAttackerResult is what the attacker process reports as its last line.
type rootAttackerResult struct {
	Held           int
	WatchesRefused int64
	WatchesSynced  int64
	ListsOK        int64
	ListsRefused   int64
	Elapsed        time.Duration
	OtherErr       string
}

// rootAttacker is the attacking client's process.
type rootAttacker struct{ proc *childproc.Process }

// startRootAttacker starts the attacker's process, identified to the
// server as a systemd unit and confined to cpu, and returns once it holds
// its watches.
func startRootAttacker(ctx context.Context, c *child, cpu *cpuLimit, held int, limit time.Duration) (*rootAttacker, error) {
	proc, err := startClientProcess(ctx, roleRootAttacker, []string{"--socket", c.socket, "--watches", fmt.Sprint(held),
		"--loopers", fmt.Sprint(fairLoopers), "--limit", limit.String()},
		func(pid int) error {
			if err := cpu.add(pid); err != nil {
				return err
			}
			return c.identify(pid, fairAttackerCgroup)
		}, "attacking")
	if err != nil {
		return nil, err
	}
	return &rootAttacker{proc: proc}, nil
}

// stop tells the attacker to stop and returns its counts.
func (a *rootAttacker) stop() (rootAttackerResult, error) {
	var res rootAttackerResult
	return res, stopClientProcess(a.proc, &res)
}

func (a *rootAttacker) kill() { a.proc.Kill() }

// runRootAttacker is the attacker's process: on "go", it opens --watches
// watches (50 a connection) and reads them, says "attacking", then loops
// on --loopers goroutines a watch beyond its share and a ListPods, until
// "stop" (or --limit), and prints its counts as JSON.
func runRootAttacker(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("stress-root-attacker", flag.ContinueOnError)
	sock := fs.String("socket", "", "socket of the server")
	watches := fs.Int("watches", fairShare, "watches to hold")
	loopers := fs.Int("loopers", fairLoopers, "goroutines looping refused watches and calls")
	limit := fs.Duration("limit", 10*time.Minute, "stop by itself after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	sctx, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stopSignals()
	actx, stop := context.WithTimeout(sctx, *limit)
	defer stop()
	lines, err := commands(stdin)
	if err != nil {
		return err
	}
	go func() {
		defer stop()
		for range lines {
		}
	}()
	var held atomic.Int64
	var wg sync.WaitGroup
	synced := make(chan error, *watches)
	var closers []func()
	defer func() {
		for _, f := range closers {
			f()
		}
	}()
	var cl podsv1alpha1connect.PodsClient
	for i := range *watches {
		if i%50 == 0 {
			var closeConns func()
			cl, closeConns = newClient(*sock, connect.WithCodec(discardCodec{}))
			closers = append(closers, closeConns)
		}
		cl := cl
		wg.Go(func() {
			s, err := cl.WatchPods(actx, connect.NewRequest(&podsv1alpha1.PodWatchRequest{}))
			if err != nil {
				synced <- err
				return
			}
			defer s.Close()
			for s.Receive() {
				if s.Msg().GetType() == podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE {
					held.Add(1)
					synced <- nil
				}
			}
			if actx.Err() == nil {
				synced <- fmt.Errorf("a held watch ended: %w", s.Err())
			}
		})
	}
	for range *watches {
		if err := <-synced; err != nil {
			stop()
			wg.Wait()
			return err
		}
	}
	fmt.Fprintln(stdout, "attacking")
	var refused, syncedN, listsOK, listsRefused, other atomic.Int64
	var otherErr atomic.Value
	start := time.Now()
	var loops sync.WaitGroup
	for range *loopers {
		loops.Go(func() {
			// Each looper on a connection of its own, as separate agents
			// of one pod would be.
			loopClient, closeLoop := newClient(*sock, connect.WithCodec(discardCodec{}))
			defer closeLoop()
			for actx.Err() == nil {
				err := watchToSync(actx, loopClient)
				switch {
				case err == nil:
					syncedN.Add(1)
				case connect.CodeOf(err) == connect.CodeResourceExhausted:
					refused.Add(1)
				case err != nil && actx.Err() == nil:
					other.Add(1)
					otherErr.CompareAndSwap(nil, err.Error())
				}
				_, err = loopClient.ListPods(actx, connect.NewRequest(&podsv1alpha1.PodListRequest{}))
				switch {
				case err == nil:
					listsOK.Add(1)
				case connect.CodeOf(err) == connect.CodeResourceExhausted:
					listsRefused.Add(1)
				}
			}
		})
	}
	loops.Wait()
	res := rootAttackerResult{Held: int(held.Load()), WatchesRefused: refused.Load(), WatchesSynced: syncedN.Load(), ListsOK: listsOK.Load(), ListsRefused: listsRefused.Load(), Elapsed: time.Since(start)}
	if v := otherErr.Load(); v != nil {
		res.OtherErr = v.(string)
	}
	stop()
	wg.Wait()
	return json.NewEncoder(stdout).Encode(res)
}
