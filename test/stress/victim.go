package stress

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/test/childproc"
)

// The victim is the second root client of every scenario: an agent in a
// pod, a process of its own (roleVictim) that the server reads in a pod's
// cgroup (child.identify), while the attack comes from another client
// (this process or one of its other children, named by their UID or their
// own unit). Every VictimInterval it calls ListPods and opens a watch read
// to its INITIAL_SYNC_COMPLETE, first alone for a quiet baseline, then
// under the attack; it must keep at least 99% of each, with a p99 within 3x
// of its quiet p99 (1 ms floor). It can also keep a watch open that checks
// every change arrives in order (a reader).
const (
	roleVictim   = "stress-victim"
	victimCgroup = "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod7f1d2c3b_4a5e_4f60_8a7b_8c9d0e1f2a3b.slice/cri-containerd-0123456789abcdef.scope\n"
)

// victimStats are the outcomes of one kind of call of the victim.
type victimStats struct {
	OK        int             `json:"ok"`
	Failed    int             `json:"failed"`
	FirstErr  string          `json:"firstErr,omitempty"`
	Latencies []time.Duration `json:"latencies"`
}

func (s *victimStats) add(start time.Time, err error) {
	if err != nil {
		s.Failed++
		if s.FirstErr == "" {
			s.FirstErr = err.Error()
		}
		return
	}
	s.OK++
	s.Latencies = append(s.Latencies, time.Since(start))
}

// mergeStats returns the outcomes of two phases as one.
func mergeStats(a, b victimStats) victimStats {
	out := victimStats{OK: a.OK + b.OK, Failed: a.Failed + b.Failed, FirstErr: a.FirstErr,
		Latencies: append(append([]time.Duration(nil), a.Latencies...), b.Latencies...)}
	if out.FirstErr == "" {
		out.FirstErr = b.FirstErr
	}
	return out
}

// victimOutcome is what the victim measured in one phase.
type victimOutcome struct {
	Lists   victimStats `json:"lists"`
	Watches victimStats `json:"watches"`
}

// readerOutcome is what the victim's reader got so far: MODIFIED events,
// gaps in the resource versions, and the delivery latencies since the last
// time they were asked for.
type readerOutcome struct {
	Modified int             `json:"modified"`
	Gaps     int             `json:"gaps"`
	Delivery []time.Duration `json:"delivery"`
}

// victimLoop calls ListPods and opens a watch (read to its
// INITIAL_SYNC_COMPLETE, then closed) every interval until ctx ends.
func victimLoop(ctx context.Context, cl podsv1alpha1connect.PodsClient, interval time.Duration) victimOutcome {
	var out victimOutcome
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return out
		case <-tick.C:
		}
		// Calls are not cut short by the end of the phase: each one
		// started is counted.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		start := time.Now()
		_, err := cl.ListPods(cctx, connect.NewRequest(&podsv1alpha1.PodListRequest{}))
		out.Lists.add(start, err)
		start = time.Now()
		out.Watches.add(start, watchToSync(cctx, cl))
		cancel()
	}
}

// watchToSync opens a watch and reads it to its INITIAL_SYNC_COMPLETE.
func watchToSync(ctx context.Context, cl podsv1alpha1connect.PodsClient) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := cl.WatchPods(ctx, connect.NewRequest(&podsv1alpha1.PodWatchRequest{}))
	if err != nil {
		return err
	}
	defer s.Close()
	for s.Receive() {
		if s.Msg().GetType() == podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE {
			return nil
		}
	}
	if err := s.Err(); err != nil {
		return err
	}
	return errors.New("the watch ended before INITIAL_SYNC_COMPLETE")
}

// runVictim is the victim's process. On "go" it connects (one connection,
// reused, as an agent's) and, with --reader, opens its reader and waits
// for its sync; it says "ready", then obeys, one a line:
//
//	start      starts a phase of victimLoop
//	end        ends the phase; answers its victimOutcome as JSON
//	reader N   waits (at most a minute) until the reader got N MODIFIED
//	           events; answers its readerOutcome as JSON
//
// until "stop" or the end of stdin (or --limit), and answers "{}".
func runVictim(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("stress-victim", flag.ContinueOnError)
	sock := fs.String("socket", "", "socket of the server")
	interval := fs.Duration("interval", 20*time.Millisecond, "time between the victim's calls")
	withReader := fs.Bool("reader", false, "keep a watch open and check its every change")
	limit := fs.Duration("limit", 30*time.Minute, "stop by itself after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	sctx, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stopSignals()
	ctx, stop := context.WithTimeout(sctx, *limit)
	defer stop()
	lines, err := commands(stdin)
	if err != nil {
		return err
	}
	cl, closeConns := newClient(*sock, connect.WithCodec(typeOnlyCodec{}))
	defer closeConns()
	var r *reader
	if *withReader {
		r = startReader(ctx, *sock)
		select {
		case <-r.synced:
		case <-r.done:
			return fmt.Errorf("the reader ended before its sync: %v", r.endErr())
		case <-time.After(time.Minute):
			return errors.New("the reader did not sync in a minute")
		}
	}
	fmt.Fprintln(stdout, "ready")
	enc := json.NewEncoder(stdout)
	var phase struct {
		cancel context.CancelFunc
		done   chan victimOutcome
	}
	endPhase := func() victimOutcome {
		if phase.cancel == nil {
			return victimOutcome{}
		}
		phase.cancel()
		out := <-phase.done
		phase.cancel = nil
		return out
	}
	defer endPhase()
	for {
		var line string
		var ok bool
		select {
		case line, ok = <-lines:
		case <-ctx.Done():
		}
		if !ok {
			break
		}
		f := strings.Fields(line)
		switch {
		case len(f) == 1 && f[0] == "start":
			endPhase()
			pctx, cancel := context.WithCancel(ctx)
			done := make(chan victimOutcome, 1)
			phase.cancel, phase.done = cancel, done
			go func() { done <- victimLoop(pctx, cl, *interval) }()
		case len(f) == 1 && f[0] == "end":
			if err := enc.Encode(endPhase()); err != nil {
				return err
			}
		case len(f) == 2 && f[0] == "reader" && r != nil:
			n, _ := strconv.Atoi(f[1])
			got := r.waitModified(n, time.Minute)
			r.mu.Lock()
			out := readerOutcome{Modified: got, Gaps: r.gaps}
			r.mu.Unlock()
			out.Delivery = r.takeLatencies()
			if err := enc.Encode(out); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unknown command %q", line)
		}
	}
	endPhase()
	stop()
	if r != nil {
		<-r.done
	}
	fmt.Fprintln(stdout, "{}")
	return nil
}

// victim is the victim's process, seen from the harness.
type victim struct {
	mu   sync.Mutex // one command at a time
	proc *childproc.Process
}

// startVictim starts the victim of c's server, identified to it as a pod,
// calling every interval; with reader, it also keeps a reader.
func startVictim(ctx context.Context, c *child, interval time.Duration, reader bool) (*victim, error) {
	proc, err := startClientProcess(ctx, roleVictim, []string{"--socket", c.socket, "--interval", interval.String(), "--reader=" + strconv.FormatBool(reader)},
		func(pid int) error { return c.identify(pid, victimCgroup) }, "ready")
	if err != nil {
		return nil, err
	}
	return &victim{proc: proc}, nil
}

// startQuietVictim starts the victim of c without a reader and measures
// its quiet baseline for d.
func startQuietVictim(ctx context.Context, c *child, o Options) (*victim, victimOutcome, error) {
	v, err := startVictim(ctx, c, o.VictimInterval, false)
	if err != nil {
		return nil, victimOutcome{}, err
	}
	quiet, err := v.quiet(o.LockoutDuration / 2)
	if err != nil {
		v.kill()
		return nil, victimOutcome{}, err
	}
	return v, quiet, nil
}

// start starts a phase of calls.
func (v *victim) start() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	_, err := fmt.Fprintln(v.proc.Stdin(), "start")
	return err
}

// end ends the phase and returns what it measured.
func (v *victim) end() (victimOutcome, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out victimOutcome
	if _, err := fmt.Fprintln(v.proc.Stdin(), "end"); err != nil {
		return out, err
	}
	return out, nextJSON(v.proc, &out)
}

// quiet is a phase of d with no attack: the baseline.
func (v *victim) quiet(d time.Duration) (victimOutcome, error) {
	if err := v.start(); err != nil {
		return victimOutcome{}, err
	}
	time.Sleep(d) // the length of the measurement, not synchronisation
	return v.end()
}

// readerGot waits until the reader got n MODIFIED events in all (at most
// a minute) and returns what it got.
func (v *victim) readerGot(n int) (readerOutcome, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out readerOutcome
	if _, err := fmt.Fprintf(v.proc.Stdin(), "reader %d\n", n); err != nil {
		return out, err
	}
	return out, nextJSON(v.proc, &out)
}

// finish ends the phase, stops the victim's process and returns what the
// phase measured.
func (v *victim) finish() (victimOutcome, error) {
	out, err := v.end()
	if err != nil {
		return out, err
	}
	return out, v.close()
}

// close stops the victim's process.
func (v *victim) close() error {
	var res struct{}
	return stopClientProcess(v.proc, &res)
}

func (v *victim) kill() { v.proc.Kill() }

// victimRows reports the victim's two rows per kind of call under the
// attack of scenario: served >= 99%, p99 <= 3x quiet (1 ms floor); note,
// when not empty, says how the attack ran (its CPU limit).
func victimRows(rep *Report, scenario string, quiet, under victimOutcome, note string) {
	if note != "" {
		note = " (" + note + ")"
	}
	for _, k := range []struct {
		what         string
		quiet, under victimStats
	}{
		{"ListPods", quiet.Lists, under.Lists},
		{"WatchPods to INITIAL_SYNC_COMPLETE", quiet.Watches, under.Watches},
	} {
		total := k.under.OK + k.under.Failed
		share := 0.0
		if total > 0 {
			share = float64(k.under.OK) / float64(total)
		}
		value := fmt.Sprintf("%d of %d (%.1f%%)", k.under.OK, total, 100*share)
		if k.under.FirstErr != "" {
			value += "; first error: " + k.under.FirstErr
		}
		rep.add(scenario, "victim's "+k.what+" served under the attack"+note, total > 0 && share >= 0.99, value, ">= 99%")
		q, u := p99(k.quiet.Latencies), p99(k.under.Latencies)
		rep.add(scenario, "victim's "+k.what+" p99 under the attack vs quiet"+note, len(k.under.Latencies) > 0 && u <= 3*max(q, time.Millisecond),
			fmt.Sprintf("%v vs %v (%.1fx)", u.Round(10*time.Microsecond), q.Round(10*time.Microsecond), float64(u)/float64(max(q, time.Millisecond))), "<= 3x (1 ms floor)")
	}
}
