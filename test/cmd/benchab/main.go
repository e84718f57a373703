// Command benchab measures a revision against another, interleaved: it
// builds the bench command (test/cmd/bench, or cmd/bench in
// revisions before the rigs moved) of the base revision in a temporary git
// worktree and of the current tree, runs them in turn (old, new, old,
// new…) with the same flags, and prints each measurement of our server as
// the ratio new/old: the median over the rounds, with the lowest and
// highest. Interleaving spreads the load of a shared machine over both
// sides. `make bench-ab BASE=<rev>` runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "benchab:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("benchab", flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("base", "", "git revision to measure against (required)")
	rounds := fs.Int("rounds", 3, "rounds of old then new")
	only := fs.String("only", "closed,watch,storm,selectors", "sections of the bench to run (bench --only)")
	md := fs.String("md", "", "also write the table as Markdown to this file")
	keep := fs.String("dir", "", "directory for the builds and results (default a temporary one, removed)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *base == "" || *rounds < 1 {
		return errors.New("--base is required, and --rounds must be at least 1")
	}
	dir := *keep
	if dir == "" {
		d, err := os.MkdirTemp("", "benchab")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	baseRev, err := output(ctx, "", "git", "rev-parse", "--short", *base+"^{commit}")
	if err != nil {
		return err
	}
	head, err := output(ctx, "", "git", "rev-parse", "--short", "HEAD")
	if err != nil {
		return err
	}
	if dirty, _ := output(ctx, "", "git", "status", "--porcelain", "--untracked-files=no"); dirty != "" {
		head += "+changes"
	}
	wt := filepath.Join(dir, "base")
	if _, err := output(ctx, "", "git", "worktree", "add", "--detach", wt, baseRev); err != nil {
		return err
	}
	defer func() { _, _ = output(context.Background(), "", "git", "worktree", "remove", "--force", wt) }()
	oldBin, newBin := filepath.Join(dir, "bench-old"), filepath.Join(dir, "bench-new")
	fmt.Fprintf(stderr, "building the bench of %s and of %s\n", baseRev, head)
	if err := build(ctx, wt, oldBin); err != nil {
		return fmt.Errorf("the bench of %s: %w", baseRev, err)
	}
	if err := build(ctx, ".", newBin); err != nil {
		return fmt.Errorf("the bench of %s: %w", head, err)
	}
	var olds, news []results
	start := time.Now()
	for i := range *rounds {
		for _, side := range []struct {
			name, bin, dir string
			into           *[]results
		}{{"old", oldBin, wt, &olds}, {"new", newBin, ".", &news}} {
			out := filepath.Join(dir, fmt.Sprintf("%s-%d.json", side.name, i))
			fmt.Fprintf(stderr, "round %d/%d: %s (%s)\n", i+1, *rounds, side.name, time.Since(start).Round(time.Second))
			cmd := exec.CommandContext(ctx, side.bin, "--quick", "--only", *only, "--json", out)
			cmd.Dir, cmd.Stdout, cmd.Stderr = side.dir, io.Discard, stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("%s bench: %w", side.name, err)
			}
			r, err := readResults(out)
			if err != nil {
				return err
			}
			*side.into = append(*side.into, r)
		}
	}
	t := compare(olds, news)
	title := fmt.Sprintf("new (%s) ÷ old (%s), %d interleaved rounds of `bench --quick --only %s`, %s", head, baseRev, *rounds, *only, time.Since(start).Round(time.Second))
	fmt.Fprintln(stdout, title)
	writeTable(stdout, t)
	if *md != "" {
		var b strings.Builder
		fmt.Fprintf(&b, "%s.\n\n", title)
		writeTable(&b, t)
		return os.WriteFile(*md, []byte(b.String()), 0o644)
	}
	return nil
}

// build builds the bench command of the tree at dir into bin.
func build(ctx context.Context, dir, bin string) error {
	pkg := "./test/cmd/bench"
	if _, err := os.Stat(filepath.Join(dir, pkg)); err != nil {
		pkg = "./cmd/bench"
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	_, err = output(ctx, dir, "go", "build", "-o", abs, pkg)
	return err
}

// output runs name with args in dir and returns its trimmed standard output.
func output(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return "", fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, exit.Stderr)
	}
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}
