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
	iofs "io/fs"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/pflag"

	"github.com/podsapi/podsapi/budget"
	"github.com/podsapi/podsapi/internal/buildinfo"
	"github.com/podsapi/podsapi/internal/loglimit"
	"github.com/podsapi/podsapi/podcgroup"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/service"
	"github.com/podsapi/podsapi/socket"
	"github.com/podsapi/podsapi/source"
	"github.com/podsapi/podsapi/store"
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

// minProgressInterval is the shortest --watch-progress-interval: progress
// marks are for watchers to learn that they are up to date, and a mark
// every millisecond for each of thousands of watchers is a flood.
const minProgressInterval = time.Second

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
	fs.StringVar(&cfg.Socket, "socket", socket.DefaultPath, "path of the UNIX socket to serve on")
	fs.StringVar(&cfg.Metrics.Address, "metrics-address", server.DefaultMetricsAddress, "TCP address of the Prometheus /metrics endpoint, or unix:PATH for a UNIX socket (mode 0600); empty disables it")
	fs.DurationVar(&cfg.Metrics.Timeout, "metrics-timeout", server.DefaultMetricsTimeout, "bounds reading a scrape request and writing its answer; metrics connections idle this long are closed")
	fs.IntVar(&cfg.Metrics.MaxConnections, "metrics-max-connections", server.DefaultMetricsMaxConnections, "metrics connections open at once; a new one takes the slot of the oldest idle one, or is closed")

	fs.Var(&idsFlag{ids: &cfg.Access.AllowedUIDs, anyPeer: &cfg.Access.AllowAnyPeer}, "allowed-uids", "comma-separated UIDs that may call the API (SO_PEERCRED; default root and the server's own user); '*' allows every peer that can open the socket")
	fs.Var(&idsFlag{ids: &cfg.Access.AllowedGIDs}, "allowed-gids", "comma-separated GIDs (effective or supplementary) whose members may call the API")
	fs.Var(modeFlag{&cfg.Access.SocketMode}, "socket-mode", "permission of the socket file, in octal (default 0600, or 0660 with --socket-group)")
	fs.StringVar(&cfg.Access.SocketGroup, "socket-group", "", "group (name or number) given to the socket, and to its directory when the server creates it")

	fs.Float64Var(&cfg.Limits.QPS, "qps", server.DefaultQPS, "requests per second allowed to ListPods and GetPod together; negative disables the limit")
	fs.IntVar(&cfg.Limits.Burst, "burst", server.DefaultBurst, "burst of the ListPods and GetPod rate limit")
	fs.Float64Var(&cfg.Limits.PerClientQPS, "per-client-qps", 0, "requests per second allowed to ListPods and GetPod per client (its pod, systemd unit, or else its UID), before the shared limit; 0: a fair share of --qps and --burst among the clients calling (a client alone has them all); negative disables it")
	fs.IntVar(&cfg.Limits.PerClientBurst, "per-client-burst", server.DefaultPerClientBurst, "burst of each client's rate limit")
	fs.DurationVar(&cfg.Limits.RateLimitDelay, "rate-limit-delay", server.DefaultRateLimitDelay, "how long a call refused by a rate limit, or a watch refused before its first message, waits before it is answered (at most half its deadline), so that clients retrying at once cannot take the CPUs from the watchers; negative answers at once")
	fs.IntVar(&cfg.Limits.MaxWatchers, "max-watchers", server.DefaultMaxWatchers, "watches open at once; beyond it WatchPods returns RESOURCE_EXHAUSTED; the Kubernetes API (--kube-api-address, --kube-api-socket) bounds its watches of the node's pods to as many more (429 beyond); negative disables the limit")
	fs.IntVar(&cfg.Limits.MaxWatchersPerClient, "max-watchers-per-client", server.DefaultMaxWatchersPerClient, "watches one client (its pod, systemd unit, or else its UID) may hold open at once; beyond it WatchPods returns RESOURCE_EXHAUSTED; negative disables the share")
	fs.IntVar(&cfg.Limits.MaxConnections, "max-connections", server.DefaultMaxConnections, "connections open at once; more are closed as soon as accepted; negative disables the limit")
	fs.IntVar(&cfg.Limits.MaxStreams, "max-streams", server.DefaultMaxStreams, "concurrent calls and watches per connection")
	budgetBytes := fs.Int64("memory-budget-bytes", 0, "bytes the server may keep on behalf of its clients (masked views, cached lists, snapshots, replays of resumed watches, history); 0: half the memory limit (cgroup memory.max or GOMEMLIMIT), 512 MiB without one; negative: no budget")
	fs.IntVar(&cfg.Limits.MaxPendingPerClient, "max-pending-per-client", server.DefaultMaxPendingPerClient, "calls of one client (its pod, systemd unit, or else its UID) that may wait for their request at once; more are refused RESOURCE_EXHAUSTED; negative disables the limit")

	// The names these two flags had when the shares were per UID.
	for old, name := range map[string]string{"max-watchers-per-uid": "max-watchers-per-client", "max-pending-per-uid": "max-pending-per-client"} {
		fs.Var(fs.Lookup(name).Value, old, "deprecated: the old name of --"+name)
		_ = fs.MarkDeprecated(old, "use --"+name)
	}

	fs.IntVar(&cfg.Watch.Queue, "watch-queue", service.DefaultWatchQueue, "live events a watcher may have queued before it is dropped for falling behind")
	fs.DurationVar(&cfg.Watch.ProgressInterval, "watch-progress-interval", service.DefaultProgressInterval, "interval between the progress marks of watches that ask for them (progress_notify); at least 1s")

	fs.DurationVar(&cfg.Transport.RequestReadTimeout, "request-read-timeout", server.DefaultRequestReadTimeout, "how long a call may take to send its request (reflection: its first message) before it ends DEADLINE_EXCEEDED; negative disables it")
	fs.DurationVar(&cfg.Transport.IdleTimeout, "idle-timeout", server.DefaultIdleTimeout, "close connections without open calls or watches after this long; negative disables it")
	fs.DurationVar(&cfg.Transport.KeepaliveInterval, "keepalive-interval", server.DefaultKeepaliveInterval, "ping a connection silent for this long; negative disables pings")
	fs.DurationVar(&cfg.Transport.KeepaliveTimeout, "keepalive-timeout", server.DefaultKeepaliveTimeout, "close a connection that does not answer a ping within this long")
	fs.DurationVar(&cfg.Transport.WriteStallTimeout, "write-stall-timeout", server.DefaultWriteStallTimeout, "reset a stream (close a connection) whose client has not read for this long while the server has data to write; negative disables it")
	fs.DurationVar(&cfg.Transport.ShutdownTimeout, "shutdown-timeout", server.DefaultShutdownTimeout, "how long a graceful shutdown may take")
	fs.StringVar(&cfg.HostProc, "host-proc", podcgroup.DefaultProc, "proc file system the cgroups of processes are read from, for FindPods (pid, caller) and to tell clients apart by pod or unit: /proc of the host's PID namespace: the server must run in it (hostPID in a DaemonSet), since SO_PEERCRED gives 0 for the PIDs of callers it cannot see")
	fs.StringVar(&cfg.NRISocket, "nri-socket", "", "the container runtime's NRI socket (containerd and CRI-O: /var/run/nri/nri.sock): observe the runtime there, so that FindPods finds containers before the pod source reports them; empty: off")
	kubeletWire := fs.Bool("kubelet-wire", true, "also serve the kubelet's own Pods API (v1alpha1.Pods, pods as bytes) on the socket, for agents written against a kubelet")

	var (
		nodeName    = fs.String("node-name", hostname, "name of the node, set as spec.nodeName of the pods")
		history     = fs.Int("watch-history", store.DefaultHistory, "changes kept for watchers that resume (resume_from); negative keeps none")
		maxPodBytes = fs.Int("max-pod-bytes", store.DefaultMaxPodBytes, "largest encoding of one pod taken from the source (the API server's object limit by default); a larger pod is refused, logged and counted (podsapi_pods_too_large_total), never served; negative takes any size")
		historyMem  = fs.Int64("watch-history-bytes", store.DefaultHistoryBytes, "bytes (pod encodings and overhead) the kept changes may hold; negative keeps none")
		logLevel    = fs.String("log-level", "info", "log level: debug, info, warn or error")
		showVersion = fs.Bool("version", false, "print the version and exit")

		deletedRetain = fs.Duration("deleted-pod-retention", store.DefaultDeletedRetention, "how long a deleted pod stays findable by FindPods with include_deleted; negative keeps none")
		deletedPods   = fs.Int("max-deleted-pods", store.DefaultDeletedPods, "deleted pods kept findable at once; the oldest deletions go first; negative keeps none")
		deletedBytes  = fs.Int64("max-deleted-pods-bytes", store.DefaultDeletedPodsBytes, "bytes (pod encodings and overhead) the deleted pods kept may hold; negative keeps none")
		srcFlags      = addSourceFlags(fs)
		kubeFlags     = addKubeAPIFlags(fs)
	)
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
	cfg.NoKubeletWire = !*kubeletWire
	switch {
	case fs.NArg() > 0:
		return usageError{fmt.Errorf("unexpected arguments: %q", fs.Args()), serverHint}
	case *nodeName == "":
		return usageError{errors.New("--node-name is required: the host name is unknown"), serverHint}
	}
	// The zero rule (package source): 0 means the default; a negative value
	// turns a limit off where that makes sense, and is a usage error where
	// it does not.
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"burst", float64(cfg.Limits.Burst)}, {"watch-queue", float64(cfg.Watch.Queue)}, {"max-streams", float64(cfg.Limits.MaxStreams)},
		{"per-client-burst", float64(cfg.Limits.PerClientBurst)},
		{"metrics-max-connections", float64(cfg.Metrics.MaxConnections)}, {"shutdown-timeout", float64(cfg.Transport.ShutdownTimeout)},
		{"keepalive-timeout", float64(cfg.Transport.KeepaliveTimeout)}, {"metrics-timeout", float64(cfg.Metrics.Timeout)},
		{"watch-progress-interval", float64(cfg.Watch.ProgressInterval)},
	} {
		if f.v < 0 {
			return usageError{fmt.Errorf("--%s must not be negative (0 means the default)", f.name), serverHint}
		}
	}
	switch pi := cfg.Watch.ProgressInterval; {
	case len(cfg.Socket) > socket.MaxPathLen:
		return usageError{fmt.Errorf("--socket %s is %d bytes: %w", cfg.Socket, len(cfg.Socket), socket.ErrPathTooLong), serverHint}
	case pi > 0 && pi < minProgressInterval:
		return usageError{fmt.Errorf("--watch-progress-interval %v is below its minimum, %v (0 means the default, %v)", pi, minProgressInterval, service.DefaultProgressInterval), serverHint}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usageError{fmt.Errorf("--log-level: %w", err), serverHint}
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.Logger, cfg.Registry = logger, reg
	if err := kubeFlags.check(); err != nil {
		return usageError{err, serverHint}
	}
	if kubeFlags.enabled() {
		// The door's API server is --kubeconfig's whatever the source.
		srcFlags.share("kubeconfig")
	}
	src, err := srcFlags.newSource(fs, source.Env{NodeName: *nodeName, Socket: cfg.Socket, MaxPodBytes: *maxPodBytes, Logger: logger, Registerer: reg})
	if err != nil {
		return usageError{err, serverHint}
	}
	st := store.New(store.WithErrorHandler(storeErrors(logger)), store.WithMaxPodBytes(*maxPodBytes), store.WithBudget(budget.ForSetting(*budgetBytes)),
		store.WithHistory(*history, *historyMem), store.WithDeletedPods(*deletedRetain, *deletedPods, *deletedBytes))
	var kube *kubeAPI
	if kubeFlags.enabled() {
		kubeconfig := fs.Lookup("kubeconfig").Value.String()
		if kube, err = kubeFlags.newKubeAPI(st, *nodeName, kubeconfig, cfg.Access, cfg.Limits.MaxWatchers, cfg.Transport.ShutdownTimeout, logger, reg); err != nil {
			return err
		}
	}
	srv, err := server.New(st, cfg)
	if err != nil {
		if kube != nil {
			kube.server.Close()
		}
		// The libraries name no flags: say here which ones to change.
		return fmt.Errorf("%w (choose another --socket or --metrics-address)", err)
	}
	if kube != nil {
		logger.Info("serving the node's pods through the Kubernetes API", "address", addrString(kube.server.Addr()),
			"socket", kubeFlags.socket, "upstream", kube.auth != nil)
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
		err := src.Run(ctx, st)
		if err != nil {
			cancel(fmt.Errorf("pod source %s: %w", src.Name(), err))
		}
		srcDone <- err
	}()
	kubeDone := make(chan struct{})
	if kube != nil {
		if kube.auth != nil {
			go func() {
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				if err := kube.auth.Check(cctx); err != nil {
					logger.Warn("the Kubernetes API cannot verify its callers", "error", err)
				}
			}()
		}
		go func() {
			defer close(kubeDone)
			if err := kube.server.Serve(ctx, kube.door); err != nil {
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

// idsFlag is a flag of comma-separated user or group IDs; with anyPeer, "*"
// sets it instead. An empty list is none, not the default.
type idsFlag struct {
	ids     *[]uint32
	anyPeer *bool // nil: "*" is not accepted
}

func (f *idsFlag) String() string {
	if f.ids == nil {
		return ""
	}
	if f.anyPeer != nil && *f.anyPeer {
		return "*"
	}
	s := make([]string, len(*f.ids))
	for i, id := range *f.ids {
		s[i] = strconv.FormatUint(uint64(id), 10)
	}
	return strings.Join(s, ",")
}

func (f *idsFlag) Type() string { return "ids" }

func (f *idsFlag) Set(v string) error {
	if f.anyPeer != nil && strings.TrimSpace(v) == "*" {
		*f.anyPeer, *f.ids = true, nil
		return nil
	}
	ids := []uint32{} // none, unless listed
	for field := range strings.SplitSeq(v, ",") {
		if field = strings.TrimSpace(field); field == "" {
			continue
		}
		id, err := strconv.ParseUint(field, 10, 32)
		if err != nil {
			return fmt.Errorf("%q is not a numeric ID", field)
		}
		ids = append(ids, uint32(id))
	}
	*f.ids = ids
	return nil
}

// modeFlag is a flag of octal permission bits.
type modeFlag struct{ mode *iofs.FileMode }

func (f modeFlag) String() string {
	if f.mode == nil || *f.mode == 0 {
		return ""
	}
	return fmt.Sprintf("%#o", uint32(*f.mode))
}

func (f modeFlag) Type() string { return "mode" }

func (f modeFlag) Set(v string) error {
	m, err := strconv.ParseUint(v, 8, 32)
	if err != nil || m == 0 || m > 0o777 {
		return fmt.Errorf("%q: want octal permission bits such as 0660", v)
	}
	*f.mode = iofs.FileMode(m)
	return nil
}

// addrString formats an address that may be absent.
func addrString(a interface{ String() string }) string {
	if a == nil {
		return "off"
	}
	return a.String()
}
