package server

import (
	"fmt"
	iofs "io/fs"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/podsapi/podsapi/podcgroup"
	"github.com/podsapi/podsapi/service"
	"github.com/podsapi/podsapi/socket"
	"github.com/podsapi/podsapi/store"
)

// AddFlags binds every setting of c to a flag of fs, under the names that
// podsapi-server's users type: the one table of the server's settings, each
// default and help written here once (docs/server.md's table is generated
// from it). The defaults are the Default constants; 0 means the default
// for every numeric flag but the bounds of the admission toolkit
// (limitFlag: --max-watchers, --max-find-waiters and their per-client
// shares), where 0, as a negative value, is no bound; Validate refuses a
// negative value where it turns nothing off. The allowed UIDs start as DefaultAllowedUIDs.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	if c.Access.AllowedUIDs == nil {
		c.Access.AllowedUIDs = DefaultAllowedUIDs()
	}
	fs.StringVar(&c.Socket, "socket", socket.DefaultPath, "path of the UNIX socket to serve on")
	fs.StringVar(&c.Metrics.Address, "metrics-address", DefaultMetricsAddress, "TCP address of the Prometheus /metrics endpoint, or unix:PATH for a UNIX socket (mode 0600); empty disables it")
	fs.DurationVar(&c.Metrics.Timeout, "metrics-timeout", DefaultMetricsTimeout, "bounds reading a scrape request and writing its answer; metrics connections idle this long are closed")
	fs.IntVar(&c.Metrics.MaxConnections, "metrics-max-connections", DefaultMetricsMaxConnections, "metrics connections open at once; a new one takes the slot of the oldest idle one, or is closed")

	fs.Var(&idsFlag{ids: &c.Access.AllowedUIDs, anyPeer: &c.Access.AllowAnyPeer}, "allowed-uids", "comma-separated UIDs that may call the API (SO_PEERCRED; default root and the server's own user); '*' allows every peer that can open the socket")
	fs.Var(&idsFlag{ids: &c.Access.AllowedGIDs}, "allowed-gids", "comma-separated GIDs (effective or supplementary) whose members may call the API")
	fs.Var(modeFlag{&c.Access.SocketMode}, "socket-mode", "permission of the socket file, in octal (default 0600, or 0660 with --socket-group)")
	fs.StringVar(&c.Access.SocketGroup, "socket-group", "", "group (name or number) given to the socket, and to its directory when the server creates it")

	fs.Float64Var(&c.Limits.QPS, "qps", DefaultQPS, "requests per second allowed to ListPods and GetPod together; negative disables the limit")
	fs.IntVar(&c.Limits.Burst, "burst", DefaultBurst, "burst of the ListPods and GetPod rate limit")
	fs.Float64Var(&c.Limits.PerClientQPS, "per-client-qps", 0, "requests per second allowed to ListPods and GetPod per client (its pod, systemd unit, or else its UID), before the shared limit; 0: a fair share of --qps and --burst among the clients calling (a client alone has them all); negative disables it")
	fs.IntVar(&c.Limits.PerClientBurst, "per-client-burst", DefaultPerClientBurst, "burst of each client's rate limit")
	fs.DurationVar(&c.Limits.RateLimitDelay, "rate-limit-delay", DefaultRateLimitDelay, "how long a call refused by a rate limit, or a watch refused before its first message, waits before it is answered (at most half its deadline), so that clients retrying at once cannot take the CPUs from the watchers; negative answers at once")
	limitVar(fs, &c.Limits.MaxWatchers, DefaultMaxWatchers, "max-watchers", "watches open at once; beyond it WatchPods returns RESOURCE_EXHAUSTED; the Kubernetes API (--kube-api-address, --kube-api-socket) bounds its watches, local and passed through, to as many more (429 beyond); 0 or negative: no limit")
	limitVar(fs, &c.Limits.MaxWatchersPerClient, DefaultMaxWatchersPerClient, "max-watchers-per-client", "watches one client (its pod, systemd unit, or else its UID) may hold open at once, and at most half of --max-watchers; beyond it WatchPods returns RESOURCE_EXHAUSTED; also each caller's share of the Kubernetes API's watches (an authenticated user, by name), 429 beyond it; 0 or negative: no share")
	limitVar(fs, &c.Limits.MaxConnections, DefaultMaxConnections, "max-connections", "connections open at once; when full, a new one sheds one without work in flight for an authenticated caller (those that never started a request first), or is closed as soon as accepted; 0 or negative: no limit")
	fs.IntVar(&c.Limits.MaxStreams, "max-streams", DefaultMaxStreams, "concurrent calls and watches per connection")
	fs.Int64Var(&c.Store.MemoryBudgetBytes, "memory-budget-bytes", 0, "bytes the server may keep on behalf of its clients (masked views, cached lists, snapshots, replays of resumed watches, history); 0: half the memory limit (cgroup memory.max or GOMEMLIMIT), 512 MiB without one; negative: no budget")
	fs.DurationVar(&c.Limits.MaxFindWait, "max-find-wait", service.DefaultMaxFindWait, "longest wait a FindPods request may ask for (its wait) for a key that matches no pod yet; longer waits are cut to it; negative turns waiting off")
	limitVar(fs, &c.Limits.MaxFindWaiters, service.DefaultMaxFindWaiters, "max-find-waiters", "FindPods calls that may wait at once; beyond it FindPods with a wait returns RESOURCE_EXHAUSTED; 0 or negative: no limit")
	limitVar(fs, &c.Limits.MaxFindWaitersPerClient, service.DefaultMaxFindWaitersPerClient, "max-find-waiters-per-client", "FindPods calls one client (its pod, systemd unit, or else its UID) may have waiting at once, and at most half of --max-find-waiters; beyond it FindPods with a wait returns RESOURCE_EXHAUSTED; 0 or negative: no share")
	limitVar(fs, &c.Limits.MaxPendingPerClient, DefaultMaxPendingPerClient, "max-pending-per-client", "calls of one client (its pod, systemd unit, or else its UID) that may wait for their request at once; more are refused RESOURCE_EXHAUSTED; 0 or negative: no limit")

	// The names these two flags had when the shares were per UID.
	for old, name := range map[string]string{"max-watchers-per-uid": "max-watchers-per-client", "max-pending-per-uid": "max-pending-per-client"} {
		fs.Var(fs.Lookup(name).Value, old, "deprecated: the old name of --"+name)
		_ = fs.MarkDeprecated(old, "use --"+name)
	}

	fs.IntVar(&c.Watch.Queue, "watch-queue", service.DefaultWatchQueue, "live events a watcher may have queued before it is dropped for falling behind")
	fs.DurationVar(&c.Watch.ProgressInterval, "watch-progress-interval", service.DefaultProgressInterval, "interval between the progress marks of watches that ask for them (progress_notify); at least 1s")

	fs.DurationVar(&c.Transport.RequestReadTimeout, "request-read-timeout", DefaultRequestReadTimeout, "how long a call may take to send its request (reflection: its first message) before it ends DEADLINE_EXCEEDED; negative disables it")
	fs.DurationVar(&c.Transport.IdleTimeout, "idle-timeout", DefaultIdleTimeout, "close connections without open calls or watches after this long; negative disables it")
	fs.DurationVar(&c.Transport.KeepaliveInterval, "keepalive-interval", DefaultKeepaliveInterval, "ping a connection silent for this long; negative disables pings")
	fs.DurationVar(&c.Transport.KeepaliveTimeout, "keepalive-timeout", DefaultKeepaliveTimeout, "close a connection that does not answer a ping within this long")
	fs.DurationVar(&c.Transport.WriteStallTimeout, "write-stall-timeout", DefaultWriteStallTimeout, "reset a stream (close a connection) whose client has not read for this long while the server has data to write; negative disables it")
	fs.DurationVar(&c.Transport.ShutdownTimeout, "shutdown-timeout", DefaultShutdownTimeout, "how long a graceful shutdown may take")
	fs.StringVar(&c.HostProc, "host-proc", podcgroup.DefaultProc, "proc file system the cgroups of processes are read from, for FindPods (pid, caller) and to tell clients apart by pod or unit: /proc of the host's PID namespace: the server must run in it (hostPID in a DaemonSet), since SO_PEERCRED gives 0 for the PIDs of callers it cannot see")
	fs.StringVar(&c.NRISocket, "nri-socket", "", "the container runtime's NRI socket (containerd and CRI-O: /var/run/nri/nri.sock): observe the runtime there, so that FindPods finds containers before the pod source reports them; empty: off")
	fs.Var(notFlag{&c.NoKubeletWire}, "kubelet-wire", "also serve the kubelet's own Pods API (v1alpha1.Pods, pods as bytes) on the socket, for agents written against a kubelet")
	fs.Lookup("kubelet-wire").NoOptDefVal = "true"
	fs.IntVar(&c.Store.HistoryEvents, "watch-history", store.DefaultHistory, "changes kept for watchers that resume (resume_from); negative keeps none")
	fs.Int64Var(&c.Store.HistoryBytes, "watch-history-bytes", store.DefaultHistoryBytes, "bytes (pod encodings and overhead) the kept changes may hold; negative keeps none")
	fs.IntVar(&c.Store.MaxPodBytes, "max-pod-bytes", store.DefaultMaxPodBytes, "largest encoding of one pod taken from the source (the API server's object limit by default); a larger pod is refused, logged and counted (podsapi_pods_too_large_total), never served; negative takes any size")
	fs.DurationVar(&c.Store.DeletedRetention, "deleted-pod-retention", store.DefaultDeletedRetention, "how long a deleted pod stays findable by FindPods with include_deleted; negative keeps none")
	fs.IntVar(&c.Store.MaxDeletedPods, "max-deleted-pods", store.DefaultDeletedPods, "deleted pods kept findable at once; the oldest deletions go first; negative keeps none")
	fs.Int64Var(&c.Store.MaxDeletedPodsBytes, "max-deleted-pods-bytes", store.DefaultDeletedPodsBytes, "bytes (pod encodings and overhead) the deleted pods kept may hold; negative keeps none")
}

// limitFlag is a flag of a bound of the admission toolkit (internal/admit):
// 0 or negative is no bound, on the command line as in the toolkit. In a
// Config, whose zero value means the default as for every field, no bound
// is kept as -1.
type limitFlag struct {
	p   *int
	def int
}

// limitVar defines the limitFlag name of p, with the default def.
func limitVar(fs *pflag.FlagSet, p *int, def int, name, usage string) {
	*p = def
	fs.Var(limitFlag{p, def}, name, usage)
}

func (f limitFlag) String() string {
	if f.p == nil {
		return strconv.Itoa(f.def)
	}
	if *f.p < 0 {
		return "0"
	}
	return strconv.Itoa(*f.p)
}

func (f limitFlag) Type() string { return "int" }

func (f limitFlag) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("%q is not a number", v)
	}
	if n <= 0 {
		n = -1
	}
	*f.p = n
	return nil
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

// notFlag is a boolean flag that sets *b to its negation: --kubelet-wire
// (default true) sets NoKubeletWire, whose zero value serves both wires.
type notFlag struct{ b *bool }

func (f notFlag) String() string {
	if f.b == nil {
		return "true"
	}
	return strconv.FormatBool(!*f.b)
}

func (f notFlag) Type() string { return "bool" }

func (f notFlag) Set(v string) error {
	on, err := strconv.ParseBool(v)
	if err != nil {
		return err
	}
	*f.b = !on
	return nil
}
