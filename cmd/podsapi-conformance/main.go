// Command podsapi-conformance checks, over its socket alone, whether an
// implementation of the Kubelet Pods API behaves as the API promises.
//
// Exit codes: 0 every selected case passed (or was skipped, or failed and is
// listed as known failing), 1 a conformance failure, 2 a usage,
// configuration or harness error (such as an implementation that never
// became reachable).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/podsapi/podsapi/conformance"
	"github.com/podsapi/podsapi/internal/buildinfo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if err != nil && !errors.Is(err, flag.ErrHelp) && !errors.Is(err, ErrFailed) {
		fmt.Fprintln(os.Stderr, "podsapi-conformance:", err)
	}
	os.Exit(ExitCode(err))
}

// ErrFailed is returned by Run when a case failed.
var ErrFailed = errors.New("conformance failure")

// ExitCode maps the error of Run to the exit code.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrFailed):
		return 1
	default:
		return 2
	}
}

// Run parses args and runs the suite. It returns nil when every case
// passed, ErrFailed when a case failed, and any other error for usage,
// configuration and harness errors.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("podsapi-conformance", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		endpoint     = fs.String("endpoint", "", "socket of the implementation: a path or unix:///path (with --server-cmd: default a fresh socket, {socket})")
		wire         = fs.String("wire", string(conformance.WirePodsAPI), "service to judge: podsapi (kubelet.pods.v1alpha1.Pods, pods typed) or kubelet (the kubelet's own v1alpha1.Pods, pods as bytes)")
		nodeName     = fs.String("node-name", "", "node name of the implementation, for a features file whose podNameSuffix holds {nodeName} (a kubelet: conformance/features/kubelet-v1.37.yaml)")
		manifestDir  = fs.String("manifest-dir", "", "static pod manifest directory of the implementation, used as the driver (with --server-cmd: default a fresh directory, {manifests})")
		serverCmd    = fs.String("server-cmd", "", "command (sh -c) that starts the implementation; {socket}, {manifests} and {metrics} are replaced")
		metricsURL   = fs.String("metrics-url", "", "Prometheus metrics URL of the implementation (derived from {metrics} in --server-cmd)")
		featuresFile = fs.String("features", "", "YAML file of the features the implementation declares")
		runRe        = fs.String("run", "", "run only the cases whose ID matches this regexp")
		skipRe       = fs.String("skip", "", "skip the cases whose ID matches this regexp")
		knownFailing = fs.String("known-failing", "", "file of case IDs expected to fail, one per line (followed by \"intermittent\" for one that fails in some runs only), # comments")
		junitFile    = fs.String("junit", "", "write a JUnit XML report to this file")
		jsonFile     = fs.String("json", "", "write a JSON report to this file")
		list         = fs.Bool("list", false, "list the cases and exit")
		markdown     = fs.Bool("markdown", false, "with --list: write the catalogue as Markdown")
		output       = fs.String("output", "", "with --list: write to this file instead of stdout")
		showVersion  = fs.Bool("version", false, "print the version of the runner and of the suite, and exit")
		verbose      = fs.Bool("v", false, "verbose: print the cases' logs and the implementation's output")
		caseTimeout  = fs.Duration("case-timeout", 60*time.Second, "bound of each case; a features file's caseTimeout raises it")
		eventTimeout = fs.Duration("event-timeout", 20*time.Second, "bound of each call and of the wait for each expected watch event; what the implementation failed to do within it fails the later cases that need it at once; a features file's eventTimeout raises it")
		startTimeout = fs.Duration("start-timeout", 30*time.Second, "how long the implementation may take to answer on its socket")
	)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: podsapi-conformance (--endpoint SOCKET [--manifest-dir DIR] | --server-cmd CMD) [--wire podsapi|kubelet] [flags]\n\n%s\n\nFlags:\n", conformance.Banner())
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if *showVersion {
		fmt.Fprintf(stdout, "%s, suite %s\n", buildinfo.String("podsapi-conformance"), conformance.Version)
		return nil
	}
	if *list {
		w := stdout
		if *output != "" {
			f, err := os.Create(*output)
			if err != nil {
				return err
			}
			defer f.Close()
			w = f
		}
		if *markdown {
			return conformance.WriteMarkdown(w)
		}
		for _, c := range conformance.Cases() {
			fmt.Fprintf(w, "%s\n", c.ID)
		}
		return nil
	}
	w, err := conformance.ParseWire(*wire)
	if err != nil {
		return fmt.Errorf("--wire: %w", err)
	}
	cfg := conformance.Config{
		Endpoint: *endpoint, Wire: w, ManifestDir: *manifestDir, MetricsURL: *metricsURL,
		CaseTimeout: *caseTimeout, EventTimeout: *eventTimeout, StartTimeout: *startTimeout, Log: stdout, Verbose: *verbose,
		Features: conformance.DefaultFeatures(),
	}
	if *featuresFile != "" {
		if cfg.Features, err = conformance.LoadFeatures(*featuresFile); err != nil {
			return err
		}
	}
	if *nodeName != "" {
		cfg.Features = cfg.Features.WithNodeName(*nodeName)
	}
	if *runRe != "" {
		if cfg.Run, err = regexp.Compile(*runRe); err != nil {
			return fmt.Errorf("--run: %w", err)
		}
	}
	if *skipRe != "" {
		if cfg.Skip, err = regexp.Compile(*skipRe); err != nil {
			return fmt.Errorf("--skip: %w", err)
		}
	}
	if *knownFailing != "" {
		if cfg.KnownFailing, cfg.KnownIntermittent, err = conformance.ReadKnownFailing(*knownFailing); err != nil {
			return err
		}
	}
	cfg.RerunCommand = rerunCommand(args)

	if *serverCmd != "" {
		dir, err := os.MkdirTemp("", "podsapi-conformance")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if cfg.Endpoint == "" {
			cfg.Endpoint = filepath.Join(dir, "pods.sock")
		}
		if cfg.ManifestDir == "" {
			cfg.ManifestDir = filepath.Join(dir, "manifests")
			if err := os.Mkdir(cfg.ManifestDir, 0o755); err != nil {
				return err
			}
		}
		command := strings.NewReplacer("{socket}", shellQuote(strings.TrimPrefix(cfg.Endpoint, "unix://")), "{manifests}", shellQuote(cfg.ManifestDir)).Replace(*serverCmd)
		if strings.Contains(command, "{metrics}") {
			addr, err := freeAddress()
			if err != nil {
				return err
			}
			command = strings.ReplaceAll(command, "{metrics}", addr)
			if cfg.MetricsURL == "" {
				cfg.MetricsURL = "http://" + addr + "/metrics"
			}
		}
		lc := &conformance.CommandLifecycle{Command: command}
		if *verbose {
			lc.Stdout, lc.Stderr = stderr, stderr
		}
		fmt.Fprintf(stdout, "starting: %s\n", command)
		if err := lc.Start(ctx); err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := lc.Stop(sctx); err != nil {
				fmt.Fprintln(stderr, "podsapi-conformance: stop the implementation:", err)
			}
		}()
		cfg.Lifecycle = lc
	}
	if cfg.Endpoint == "" {
		fs.Usage()
		return errors.New("--endpoint or --server-cmd is required")
	}

	rep, err := conformance.RunCases(ctx, cfg)
	if *jsonFile != "" {
		if werr := writeFile(*jsonFile, rep.WriteJSON); werr != nil && err == nil {
			err = werr
		}
	}
	if *junitFile != "" {
		if werr := writeFile(*junitFile, rep.WriteJUnit); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		return err
	}
	if !rep.OK() {
		var failed []string
		for _, r := range rep.Results {
			if r.Status == conformance.Failed {
				failed = append(failed, r.ID)
			}
		}
		fmt.Fprintf(stdout, "FAIL: %s\n", strings.Join(failed, ", "))
		return ErrFailed
	}
	fmt.Fprintln(stdout, "PASS")
	return nil
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// freeAddress returns a loopback address with a port that was free.
func freeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// rerunCommand is the command line without --run and --skip and the
// report files.
func rerunCommand(args []string) string {
	out := []string{"podsapi-conformance"}
	drop := map[string]bool{"run": true, "skip": true, "junit": true, "json": true}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name := strings.TrimLeft(a, "-")
		if j := strings.Index(name, "="); j >= 0 {
			if drop[name[:j]] {
				continue
			}
		} else if drop[name] && strings.HasPrefix(a, "-") {
			i++
			continue
		}
		out = append(out, shellQuote(a))
	}
	return strings.Join(out, " ")
}

// shellQuote quotes s for sh when needed.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
