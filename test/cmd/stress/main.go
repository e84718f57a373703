// Command stress runs the server as a child process and attacks it over its
// UNIX socket (flood, stalled watchers, connection churn, garbage, lockout), prints a
// table of the checks and exits 1 when one is violated.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/podsapi/podsapi/test/stress"
)

func main() {
	stress.MaybeChild()
	o := stress.Defaults()
	fs := flag.NewFlagSet("stress", flag.ExitOnError)
	fs.DurationVar(&o.Duration, "duration", o.Duration, "duration of the flood (and of its baseline)")
	fs.IntVar(&o.FloodClients, "flood-clients", o.FloodClients, "clients of the flood")
	fs.IntVar(&o.Watchers, "watchers", o.Watchers, "watchers during the flood")
	fs.Float64Var(&o.QPS, "qps", o.QPS, "the server's --qps during the flood")
	fs.IntVar(&o.Burst, "burst", o.Burst, "the server's --burst during the flood")
	fs.IntVar(&o.ChurnRate, "churn-rate", o.ChurnRate, "pod changes per second during the flood")
	fs.BoolVar(&o.FloodDecode, "flood-decode", o.FloodDecode, "make the flood clients decode their responses, taking CPU from the node as a real agent would")
	fs.Float64Var(&o.FloodPerClientQPS, "flood-per-client-qps", o.FloodPerClientQPS, "the server's --per-client-qps during the flood (0: the server's default, a fair share of --qps among the clients calling; negative: off)")
	fs.DurationVar(&o.RateLimitDelay, "rate-limit-delay", o.RateLimitDelay, "the server's --rate-limit-delay during the flood (0: its default; negative: refuse at once)")
	fs.IntVar(&o.Stalled, "stalled", o.Stalled, "watchers that never read")
	fs.IntVar(&o.Readers, "readers", o.Readers, "watchers that read, beside the stalled ones")
	fs.IntVar(&o.UpdateRate, "update-rate", o.UpdateRate, "pod changes per second with stalled watchers")
	fs.DurationVar(&o.StallDuration, "stall-duration", o.StallDuration, "how long the changes with stalled watchers last")
	fs.DurationVar(&o.StallTimeout, "write-stall-timeout", o.StallTimeout, "the server's --write-stall-timeout")
	fs.IntVar(&o.Cycles, "cycles", o.Cycles, "connect/call/disconnect cycles")
	fs.IntVar(&o.GarbageConns, "garbage", o.GarbageConns, "hostile connections")
	fs.IntVar(&o.Slowloris, "slowloris", o.Slowloris, "lockout: silent connections kept by the attacker")
	fs.IntVar(&o.HeldConns, "held-conns", o.HeldConns, "lockout: connections of held streams")
	fs.IntVar(&o.HeldStreams, "held-streams", o.HeldStreams, "lockout: held streams per connection")
	fs.DurationVar(&o.HeldTimeout, "request-read-timeout", o.HeldTimeout, "lockout: the server's --request-read-timeout")
	fs.DurationVar(&o.LockoutDuration, "lockout-duration", o.LockoutDuration, "lockout: how long the victim calls under attack")
	fs.DurationVar(&o.VictimInterval, "victim-interval", o.VictimInterval, "time between the victim's calls, in every scenario")
	fs.IntVar(&o.Herd, "herd", o.Herd, "resume: watchers of each herd")
	fs.IntVar(&o.HerdPods, "herd-pods", o.HerdPods, "resume: pods of the server")
	fs.IntVar(&o.HerdBack, "herd-back", o.HerdBack, "resume: how many changes back the herd resumes")
	fs.IntVar(&o.HerdChurn, "herd-churn", o.HerdChurn, "resume: pod changes per second during the herds")
	fs.DurationVar(&o.HerdTimeout, "herd-timeout", o.HerdTimeout, "resume: how long each herd may take to sync")
	fs.IntVar(&o.MaskPadding, "mask-padding", o.MaskPadding, "masks: bytes of annotation per pod (50 pods)")
	only := fs.String("only", "", "comma-separated scenarios to run (flood, stalled, churn, garbage, lockout, fairness, snapshots, resume, masks, maskcpu, unread); all by default")
	verbose := fs.Bool("v", false, "log progress to stderr")
	fs.Parse(os.Args[1:])
	if *verbose {
		o.Log = os.Stderr
	}
	var which []string
	if *only != "" {
		which = strings.Split(*only, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, err := stress.Run(ctx, o, which...)
	rep.Print(os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stress:", err)
		os.Exit(1)
	}
	if failed := rep.Failed(); len(failed) > 0 {
		fmt.Fprintf(os.Stderr, "stress: %d invariants violated\n", len(failed))
		os.Exit(1)
	}
}
