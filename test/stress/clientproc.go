package stress

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/podsapi/podsapi/test/childproc"
)

// The clients that run as processes of their own (the flood, the root
// attacker, the victim) share one protocol on their stdin and stdout: they
// wait for "go" before they connect, so that the harness can identify them
// to the server first (child.identify); they say a ready line once in
// place; on "stop" (or the end of stdin) they stop and print their result
// as one JSON line.

// startClientProcess starts the stress binary in role with args, gives
// setup its PID (nil: nothing to set up), tells it to go and returns once
// it has said ready. The process is killed when ctx ends.
func startClientProcess(ctx context.Context, role string, args []string, setup func(pid int) error, ready string) (*childproc.Process, error) {
	proc, err := childproc.Start(childproc.Spec{Role: role, Args: args})
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, proc.Kill)
	if setup != nil {
		if err := setup(proc.Pid()); err != nil {
			proc.Kill()
			return nil, err
		}
	}
	fmt.Fprintln(proc.Stdin(), "go")
	nctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if line, err := proc.Next(nctx); err != nil || line != ready {
		proc.Kill()
		return nil, fmt.Errorf("start %s: it said %q, want %q: %v", role, line, ready, err)
	}
	return proc, nil
}

// stopClientProcess tells proc to stop, decodes the JSON line it answers
// into res and waits for its exit.
func stopClientProcess(proc *childproc.Process, res any) error {
	fmt.Fprintln(proc.Stdin(), "stop")
	proc.CloseStdin()
	if err := nextJSON(proc, res); err != nil {
		return err
	}
	return proc.Wait(30 * time.Second)
}

// nextJSON decodes the next line of proc's stdout into res; it kills proc
// when it cannot.
func nextJSON(proc *childproc.Process, res any) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	line, err := proc.Next(ctx)
	if err != nil {
		proc.Kill()
		return err
	}
	if err := json.Unmarshal([]byte(line), res); err != nil {
		proc.Kill()
		return fmt.Errorf("the client process said %q: %w", line, err)
	}
	return nil
}

// commands is the client process's side: it waits for "go" on stdin and
// returns the later lines on a channel, closed at "stop" or the end of
// stdin.
func commands(stdin io.Reader) (<-chan string, error) {
	sc := bufio.NewScanner(stdin)
	if !sc.Scan() || strings.TrimSpace(sc.Text()) != "go" {
		return nil, errors.New("not told to go")
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "stop" {
				return
			}
			lines <- line
		}
	}()
	return lines, nil
}
