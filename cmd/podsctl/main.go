// Command podsctl reads the pods of a node from the Kubelet Pods API, for
// people: podsctl list, podsctl get UID and podsctl watch print kubectl-like
// tables, Kubernetes JSON or YAML, or names.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(report(err, os.Stderr))
}

// now is the clock ages are computed with; tests replace it.
var now = time.Now

// usage is the help of the command.
const usage = `Usage: podsctl COMMAND [flags]

Reads the pods of this node from the Kubelet Pods API: podsapi's
(kubelet.pods.v1alpha1.Pods), or the kubelet's own (v1alpha1.Pods), which
--wire chooses; by default podsctl detects which one the socket serves.

Commands:
  list        list the pods
  get UID     print one pod by its UID
  watch       print the pods, then every change

Run podsctl COMMAND -h for the flags of a command.
`

// Run runs the command line args, printing results to stdout and usage
// messages to stderr. Errors are returned, not printed: see report.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageError{errors.New("no command")}
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "list":
		return runList(ctx, rest, stdout, stderr)
	case "get":
		return runGet(ctx, rest, stdout, stderr)
	case "watch":
		return runWatch(ctx, rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return usageError{fmt.Errorf("unknown command %q", cmd)}
	}
}

// usageError is an error in the command line.
type usageError struct{ error }

// Unwrap returns the error.
func (e usageError) Unwrap() error { return e.error }

// Exit codes.
const (
	exitOK     = 0
	exitServer = 1
	exitUsage  = 2
)

// report prints err, if any, with a hint, and returns the exit code.
func report(err error, stderr io.Writer) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, new(usageError)):
		fmt.Fprintln(stderr, "podsctl:", err)
		return exitUsage
	default:
		fmt.Fprintln(stderr, "podsctl:", describe(err))
		if h := hint(err); h != "" {
			fmt.Fprintln(stderr, "hint:", h)
		}
		return exitServer
	}
}
