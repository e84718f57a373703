// Command podsctl reads the pods of a node from the Kubelet Pods API, for
// people: podsctl list, podsctl get UID|NAMESPACE/NAME and podsctl watch
// print kubectl-like tables, Kubernetes JSON or YAML, or names. Its command
// line follows kubectl's and crictl's (spf13/cobra): global flags go before
// or after the command, and podsctl completion prints shell completions.
package main

import (
	"context"
	"errors"
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

// Run runs the command line args, printing results and help to stdout and
// warnings to stderr. Errors are returned, not printed: see report. An error
// in the command line (an unknown command or flag, a bad value, a missing
// argument) is a usageError.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a := &app{stdout: stdout, stderr: stderr}
	root := a.command()
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return nil
	}
	path := root.CommandPath()
	if cmd != nil {
		path = cmd.CommandPath()
	}
	var ue usageError
	switch {
	case errors.As(err, &ue):
		return usageError{ue.error, path}
	case !a.ran:
		// cobra refused the command line before any command ran.
		return usageError{err, path}
	}
	return err
}

// usageError is an error in the command line of command, such as "podsctl
// list".
type usageError struct {
	error
	command string
}

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
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "podsctl:", err)
		if ue.command != "" {
			fmt.Fprintf(stderr, "See '%s --help' for usage.\n", ue.command)
		}
		return exitUsage
	default:
		fmt.Fprintln(stderr, "podsctl:", describe(err))
		if h := hint(err); h != "" {
			fmt.Fprintln(stderr, "hint:", h)
		}
		return exitServer
	}
}
