// Command bench is the `make bench` harness of the Pods API: it serves our
// server and the baselines in child processes on UNIX sockets, drives them,
// and reports every figure as a ratio to the baselines measured in the same
// run. See docs/benchmarks.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/podsapi/podsapi/test/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := bench.Run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
