package stress

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/net/http2"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
)

// lockoutSlots is the server's --max-connections in the lockout scenario:
// small, so that the slowloris connections fill it many times over.
const lockoutSlots = 64

// lockout checks that one client cannot lock another out: an attacker
// keeps Slowloris connections that never send their preface (more than the
// server's slots) and HeldConns connections of HeldStreams streams whose
// request never comes, reopening whatever the server closes. Two clients
// must keep 99% of their calls meanwhile: the victim (a pod, see victim.go),
// connected before the attack, and a client of the attacker's own UID (this
// process), connecting under the attack and calling ListPods every
// VictimInterval; the held streams stay under the server's per-client limit of
// waiting calls (--max-pending-per-client, 256), which they would otherwise
// take from it. The attack runs in this process, confined to attackerCPU
// while it runs.
func lockout(ctx context.Context, o Options, rep *Report) error {
	const name = "5 lockout"
	// No rate limit: the attack is on connections and streams, and the
	// two clients' calls (more than 100 a second) are not.
	c, err := startChild("--qps", "-1", "--max-connections", fmt.Sprint(lockoutSlots), "--request-read-timeout", o.HeldTimeout.String())
	if err != nil {
		return err
	}
	defer c.kill()
	rssBefore, fdsBefore := c.rss(), c.fds()
	goBefore, err := c.metric("go_goroutines")
	if err != nil {
		return err
	}
	v, quiet, err := startQuietVictim(ctx, c, o)
	if err != nil {
		return err
	}
	defer v.kill()
	cpu := newCPULimit(attackerCPU)
	defer cpu.remove()
	release, err := cpu.confineSelf()
	if err != nil {
		return err
	}
	defer release()
	if err := v.start(); err != nil {
		return err
	}
	meter := meterCPU(c, selfCPU)
	actx, stopAttack := context.WithCancel(ctx)
	defer stopAttack()
	var attackers sync.WaitGroup
	var slowOpened, heldOpened, heldEnded atomic.Int64
	for range o.Slowloris {
		attackers.Go(func() { slowloris(actx, c.socket, &slowOpened) })
	}
	for range o.HeldConns {
		attackers.Go(func() { heldStreams(actx, c.socket, o.HeldStreams, &heldOpened, &heldEnded) })
	}
	// The attack is in place once the slots have been full and held
	// streams have been opened.
	if _, v, err := c.waitMetric("podsapi_connections_open", func(v float64) bool { return v >= lockoutSlots }, 30*time.Second); err != nil {
		return fmt.Errorf("the attack did not fill the connection slots (%v open): %w", v, err)
	}
	// The victim is an agent: one connection, reused, opened under the
	// attack (and again if it is lost). Every tenth call, a call on a new
	// connection shows what a client connecting for each call gets.
	victim, closeVictim := newClient(c.socket, connect.WithCodec(discardCodec{}))
	defer closeVictim()
	call := func(cl podsv1alpha1connect.PodsClient) error {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := cl.ListPods(cctx, connect.NewRequest(&podsv1alpha1.PodListRequest{}))
		return err
	}
	var ok, failed, freshOK, freshFailed int
	var firstErr, freshErr error
	var rssPeak int64
	var goPeak float64
	start := time.Now()
	tick := time.NewTicker(o.VictimInterval)
	for k := 0; time.Since(start) < o.LockoutDuration && ctx.Err() == nil; k++ {
		<-tick.C
		if err := call(victim); err == nil {
			ok++
		} else {
			failed++
			if firstErr == nil {
				firstErr = err
			}
		}
		if k%10 == 0 {
			fresh, closeFresh := newClient(c.socket, connect.WithCodec(discardCodec{}))
			if err := call(fresh); err == nil {
				freshOK++
			} else {
				freshFailed++
				if freshErr == nil {
					freshErr = err
				}
			}
			closeFresh()
		}
		if k%20 == 0 {
			rssPeak = max(rssPeak, c.rss())
			if g, err := c.metric("go_goroutines"); err == nil {
				goPeak = max(goPeak, g)
			}
		}
	}
	tick.Stop()
	meter.row(rep, name)
	under, err := v.finish()
	if err != nil {
		return err
	}
	stopAttack()
	attackers.Wait()
	release()
	shed, _ := c.metric("podsapi_connections_shed_total")
	for _, e := range []struct {
		what string
		err  error
	}{{"victim", firstErr}, {"new connection", freshErr}} {
		if e.err != nil {
			fmt.Fprintf(o.Log, "stress: lockout: first %s error: %v\n", e.what, e.err)
		}
	}
	percent := func(ok, total int) string {
		return fmt.Sprintf("%d of %d (%.1f%%)", ok, total, 100*float64(ok)/float64(max(total, 1)))
	}
	total := ok + failed
	victimRows(rep, name, quiet, under, cpu.Note)
	rep.add(name, fmt.Sprintf("attacker's own ListPods while %d slowloris and %d×%d held streams attack (%d slots)",
		o.Slowloris, o.HeldConns, o.HeldStreams, lockoutSlots),
		total > 0 && ok*100 >= total*99, percent(ok, total), ">= 99%")
	// Reported, not checked: a connection is shed if the attacker's
	// connections outnumber the slots before the server reads its first
	// bytes (milliseconds under this attack).
	rep.add(name, "ListPods on a new connection each (every tenth tick)", true, percent(freshOK, freshOK+freshFailed), "reported")
	rep.add(name, "attack: slowloris connections opened / shed; held streams opened / ended by the server",
		shed > 0 && heldEnded.Load() > 0,
		fmt.Sprintf("%d / %.0f; %d / %d", slowOpened.Load(), shed, heldOpened.Load(), heldEnded.Load()), "shed > 0, ended > 0")
	// Once the attack stops, what it held is given back.
	_, goAfter, err := c.waitMetric("go_goroutines", func(v float64) bool { return v <= goBefore+2 }, 30*time.Second)
	rep.add(name, "server goroutines before / peak / after", err == nil,
		fmt.Sprintf("%.0f / %.0f / %.0f", goBefore, goPeak, goAfter), fmt.Sprintf("after <= %.0f", goBefore+2))
	// The sockets of the last shed connections are closed 100 ms after
	// their shedding.
	_, fds, _ := c.waitMetric("process_open_fds", func(v float64) bool { return v <= float64(fdsBefore+2) }, 30*time.Second)
	fdsAfter := int(fds)
	rep.add(name, "server RSS before / peak; fds before / after", fdsAfter <= fdsBefore+2,
		fmt.Sprintf("%s / %s; %d / %d", mib(rssBefore), mib(rssPeak), fdsBefore, fdsAfter), fmt.Sprintf("fds after <= %d", fdsBefore+2))
	_, err = c.stop(10 * time.Second)
	return err
}

// slowloris keeps one connection that never sends its preface, opening a
// new one whenever the server closes it, until ctx ends.
func slowloris(ctx context.Context, socket string, opened *atomic.Int64) {
	for ctx.Err() == nil {
		c, err := net.Dial("unix", socket)
		if err != nil {
			return
		}
		opened.Add(1)
		stop := context.AfterFunc(ctx, func() { c.Close() })
		_, _ = io.Copy(io.Discard, c) // until the server (or ctx) closes it
		stop()
		c.Close()
	}
}

// heldStreams keeps a connection with streams streams open on health
// (open to every peer), each sending HEADERS and never its request: when
// the server ends one, another is opened; when it closes the connection, a
// new one is dialled. It runs until ctx ends.
func heldStreams(ctx context.Context, socket string, streams int, opened, ended *atomic.Int64) {
	for ctx.Err() == nil {
		c, err := net.Dial("unix", socket)
		if err != nil {
			return
		}
		stop := context.AfterFunc(ctx, func() { c.Close() })
		holdOn(c, streams, opened, ended)
		stop()
		c.Close()
	}
}

// holdOn runs the held streams of one connection until it is closed.
func holdOn(c net.Conn, streams int, opened, ended *atomic.Int64) {
	h2 := newH2Conn(c, c)
	next := uint32(1)
	done := make(map[uint32]bool)
	open := func() error {
		id := next
		next += 2
		opened.Add(1)
		return h2.request(id, "/grpc.health.v1.Health/Check", 0)
	}
	if err := h2.preface(); err != nil {
		return
	}
	for range streams {
		if open() != nil {
			return
		}
	}
	for {
		f, err := h2.fr.ReadFrame()
		if err != nil {
			return
		}
		stream := f.Header().StreamID
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				err = h2.fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				err = h2.fr.WritePing(true, f.Data)
			}
		case *http2.GoAwayFrame:
			return
		default:
			if stream != 0 && !done[stream] && endsStream(f) {
				done[stream] = true
				ended.Add(1)
				if next < 1<<30 {
					err = open()
				}
			}
		}
		if err != nil {
			return
		}
	}
}
