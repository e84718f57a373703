// Command podsapi-server serves the Kubelet Pods API on a UNIX socket, in its
// typed form and in the kubelet's own, fed by one pod source (--source): a
// directory of static pod manifests, the kubelet's /pods endpoint, the
// kubelet's own Pods API socket, or a watch of the API server. It only wires flags to the packages that do
// the work (server, service, store, source/...).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/podsapi/podsapi/budget"
	"github.com/podsapi/podsapi/internal/buildinfo"
	"github.com/podsapi/podsapi/internal/loglimit"
	"github.com/podsapi/podsapi/kubeapi/door"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/source"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/workload"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	run, args := Run, os.Args[1:]
	if len(args) > 0 && args[0] == "probe" {
		run, args = Probe, args[1:]
	} else {
		// The process's own settings, for the whole process: set here,
		// not in Run, which tests call in one process.
		if _, err := budget.SetLimit(budget.DefaultLimitFraction, budget.CgroupFile, budget.CgroupV1File); err != nil {
			fmt.Fprintln(os.Stderr, "podsapi-server: memory limit of the cgroup:", err)
		}
		budget.SetGCPercent(budget.DefaultGCPercent)
	}
	os.Exit(exitCode(run(ctx, args, os.Stdout, os.Stderr), os.Stderr))
}

// exitCode reports err, the error of Run or Probe, on stderr and returns
// the exit status: 0 for none and for --help (whose usage is on stdout),
// 2 for an error in the command line (with a hint, not the whole usage),
// 1 for any other.
func exitCode(err error, stderr io.Writer) int {
	var usage usageError
	switch {
	case err == nil, errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "podsapi-server: %v\n%s\n", err, usage.hint)
		return 2
	default:
		fmt.Fprintln(stderr, "podsapi-server:", err)
		return 1
	}
}

// flagsDefined, when set, is given Run's flag set once every flag is
// defined, and Run then returns nil without parsing: the test that writes
// the flags table of docs/server.md reads the flags from it.
var flagsDefined func(*pflag.FlagSet)

// usageError is an error in the command line.
type usageError struct {
	error
	hint string // where to read the flags
}

// serverHint and probeHint are the hints of usage errors.
const (
	serverHint = "Run 'podsapi-server --help' for the flags."
	probeHint  = "Run 'podsapi-server probe --help' for the flags."
)

// Run parses args, serves until ctx is done, and returns what stopped it.
// Logs go to stderr; stdout takes only what --version prints.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("podsapi-server", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	hostname, _ := os.Hostname()
	// The flags are bound straight to the fields of the server's Config.
	cfg := server.Config{Access: server.AccessConfig{AllowedUIDs: server.DefaultAllowedUIDs()}}
	cfg.AddFlags(fs)

	var (
		nodeName    = fs.String("node-name", hostname, "name of the node, set as spec.nodeName of the pods")
		logLevel    = fs.String("log-level", "info", "log level: debug, info, warn or error")
		showVersion = fs.Bool("version", false, "print the version and exit")
		srcFlags    = addSourceFlags(fs)
		kube        door.Settings
		workloads   workload.Settings
	)
	kube.AddFlags(fs)
	workloads.AddFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: podsapi-server [--source manifest] --manifest-dir DIR [flags]\n"+
			"       podsapi-server --source kubelet-http [--kubelet-url URL] [flags]\n"+
			"       podsapi-server --source kubelet-grpc --source-socket PATH --socket OTHER_PATH [flags]\n"+
			"       podsapi-server --source apiserver [--kubeconfig PATH] --node-name NODE [flags]\n"+
			"       podsapi-server probe [--socket PATH] [--serving]\n"+
			"       podsapi-server --version\n\n"+
			"Serves the Kubelet Pods API on a UNIX socket.\n\n"+
			"For every numeric flag, 0 means the default shown; a negative value turns the\n"+
			"limit or timeout off where the flag says so, and is refused elsewhere.\n\nFlags:\n")
		fmt.Fprint(fs.Output(), fs.FlagUsages())
	}
	if flagsDefined != nil {
		flagsDefined(fs)
		return nil
	}
	if err := parse(fs, args, stdout); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return usageError{err, serverHint}
	}
	if *showVersion {
		fmt.Fprintln(stdout, buildinfo.String("podsapi-server"))
		return nil
	}
	switch {
	case fs.NArg() > 0:
		return usageError{fmt.Errorf("unexpected arguments: %q", fs.Args()), serverHint}
	case *nodeName == "":
		return usageError{errors.New("--node-name is required: the host name is unknown"), serverHint}
	}
	// The node view (on by default) answers from the node's slice, which
	// the workload resolution keeps from the API server: without what it
	// needs it is off, unless asked for.
	if kube.NodeView && (!kube.Enabled() || !kube.Kinds || workloads.Mode != workload.ModeAPIServer) {
		if fs.Changed("kube-api-node-view") {
			return usageError{fmt.Errorf("--kube-api-node-view needs %s", door.NodeViewNeeds), serverHint}
		}
		kube.NodeView = false
	}
	workloads.Slice = kube.NodeView
	if err := errors.Join(cfg.Validate(), kube.Validate(), workloads.Validate()); err != nil {
		return usageError{err, serverHint}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usageError{fmt.Errorf("--log-level: %w", err), serverHint}
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	reg := server.NewRegistry()
	cfg.Logger, cfg.Registry = logger, reg
	if kube.Enabled() || workloads.Mode == workload.ModeAPIServer {
		// The door's API server, and the workloads', is --kubeconfig's
		// whatever the source.
		srcFlags.share("kubeconfig")
	}
	src, err := srcFlags.newSource(fs, source.Env{NodeName: *nodeName, Socket: cfg.Socket, MaxPodBytes: cfg.Store.MaxPodBytes, Logger: logger, Registerer: reg})
	if err != nil {
		return usageError{err, serverHint}
	}
	st := store.New(append(cfg.Store.Options(), store.WithErrorHandler(storeErrors(logger)))...)
	resolver, err := workloads.NewResolver(fs.Lookup("kubeconfig").Value.String(), logger, reg)
	if err != nil {
		return usageError{err, serverHint}
	}
	var sink source.Sink = st
	if resolver != nil {
		cfg.Workloads, sink = resolver, resolver.Sink(st)
	}
	var api *door.API
	if kube.Enabled() {
		sockOpts, err := cfg.Access.SocketOptions()
		if err != nil {
			return err
		}
		var nodeSlice door.Slice
		if kube.NodeView {
			nodeSlice = resolver
		}
		api, err = kube.Open(door.Env{
			Pods: st, Node: *nodeName, Kubeconfig: fs.Lookup("kubeconfig").Value.String(), Slice: nodeSlice,
			Peers: cfg.Access.Policy(), SocketOptions: sockOpts, MaxWatches: cfg.Limits.MaxWatchers, MaxWatchesPerCaller: cfg.Limits.MaxWatchersPerClient,
			ShutdownTimeout: cfg.Transport.ShutdownTimeout, Logger: logger, Registerer: reg,
		})
		if err != nil {
			return err
		}
	}
	srv, err := server.New(st, cfg)
	if err != nil {
		if api != nil {
			api.Close()
		}
		// The libraries name no flags: say here which ones to change.
		return fmt.Errorf("%w (choose another --socket or --metrics-address)", err)
	}
	if api != nil {
		logger.Info("serving the node's pods through the Kubernetes API", "address", addrString(api.Addr()),
			"socket", kube.Socket, "upstream", api.Auth != nil)
	}
	l := cfg.Limits
	logger.Info("serving the Pods API", "version", buildinfo.Get(),
		"socket", srv.SocketPath(), "metrics", addrString(srv.MetricsAddr()), "source", src.Name(), "node", *nodeName, "nriSocket", cfg.NRISocket,
		"qps", l.QPS, "burst", l.Burst, "watchQueue", cfg.Watch.Queue,
		"allowedUIDs", fs.Lookup("allowed-uids").Value.String(), "allowedGIDs", fs.Lookup("allowed-gids").Value.String(),
		"perClientQPS", l.PerClientQPS, "rateLimitDelay", l.RateLimitDelay,
		"maxWatchers", l.MaxWatchers, "maxWatchersPerClient", l.MaxWatchersPerClient, "maxPendingPerClient", l.MaxPendingPerClient, "maxConnections", l.MaxConnections, "goMemLimit", debug.SetMemoryLimit(-1), "goGC", budget.GCPercent())

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	srcDone := make(chan error, 1)
	go func() {
		err := src.Run(ctx, sink)
		if err != nil {
			cancel(fmt.Errorf("pod source %s: %w", src.Name(), err))
		}
		srcDone <- err
	}()
	resolverDone := make(chan struct{})
	go func() {
		defer close(resolverDone)
		if resolver != nil {
			resolver.Run(ctx)
		}
	}()
	kubeDone := make(chan struct{})
	if api != nil {
		go func() {
			defer close(kubeDone)
			if err := api.Serve(ctx); err != nil {
				cancel(fmt.Errorf("Kubernetes API: %w", err))
			}
		}()
	} else {
		close(kubeDone)
	}
	start := time.Now()
	serr := srv.Serve(ctx)
	cancel(nil)
	<-kubeDone
	<-srcDone
	<-resolverDone
	logger.Info("stopped", "uptime", time.Since(start).Round(time.Millisecond))
	if serr != nil {
		return serr
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

// parse parses args with fs. A request for help (--help, -h) prints the
// usage to stdout and returns pflag.ErrHelp.
func parse(fs *pflag.FlagSet, args []string, stdout io.Writer) error {
	usage := fs.Usage
	fs.Usage = func() {
		fs.SetOutput(stdout)
		usage()
	}
	return fs.Parse(args)
}

// storeErrors returns the store's error handler: it logs the pods the store
// refuses at most once per kind of error every 10 s, with
// the number held back, so that a source sending them endlessly does not
// flood the log; the store counts every one.
func storeErrors(logger *slog.Logger) func(error) {
	limit := loglimit.New[bool](10 * time.Second)
	return func(err error) {
		tooLarge := errors.Is(err, store.ErrPodTooLarge)
		ok, suppressed := limit.Allow(tooLarge)
		if !ok {
			return
		}
		args := []any{"error", err}
		if suppressed > 0 {
			args = append(args, "suppressed", suppressed)
		}
		if tooLarge {
			logger.Warn("refused a pod larger than --max-pod-bytes", args...)
			return
		}
		logger.Error("cannot store pod", args...)
	}
}

// addrString formats an address that may be absent.
func addrString(a interface{ String() string }) string {
	if a == nil {
		return "off"
	}
	return a.String()
}
