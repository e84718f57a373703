package workload

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The modes of Settings.Mode.
const (
	// ModeOff resolves no workloads: FindPods answers none.
	ModeOff = "off"
	// ModeDerive resolves what the pods alone tell, and derives the
	// workloads of ReplicaSets and Jobs from names (Derived), with no
	// request to the API server.
	ModeDerive = "derive"
	// ModeAPIServer gets the metadata of the ReplicaSets and Jobs of the
	// node's pods from the API server.
	ModeAPIServer = "apiserver"
)

// Settings are the command-line settings of the workload resolution of
// podsapi-server.
type Settings struct {
	// Mode is ModeOff, ModeDerive (the default) or ModeAPIServer.
	Mode string
	// Refresh is the Resolver's refresh interval (WithRefreshInterval); 0
	// takes its default.
	Refresh time.Duration
	// StaleAfter is the Resolver's stale-after bound (WithStaleAfter); 0
	// takes its default.
	StaleAfter time.Duration
	// Slice makes the Resolver keep the node's slice (WithSlice), whole
	// objects got with NewObjectGetter, for the front door's node view. It
	// is not a flag: podsapi-server sets it when the door serves the node
	// view, and it needs ModeAPIServer.
	Slice bool
}

// AddFlags binds s to --workloads, --workload-refresh and
// --workload-stale-after on fs.
func (s *Settings) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&s.Mode, "workloads", ModeDerive, "how FindPods' matches get their workload (Deployment, StatefulSet, DaemonSet, CronJob, Job...): derive (from the pod and its owner's names only), apiserver (one metadata get per ReplicaSet or Job of the node's pods, with --kubeconfig or in-cluster; needs RBAC get on replicasets and jobs), or off")
	fs.DurationVar(&s.Refresh, "workload-refresh", 0, "with --workloads=apiserver, how long an owner's answer is kept before it is asked again (0: 30m)")
	fs.DurationVar(&s.StaleAfter, "workload-stale-after", 0, "with --workloads=apiserver, how long the last answer of an owner the API server no longer answers about stays resolved before it is marked unresolved (0: 1h)")
}

// Validate says what is wrong with s.
func (s Settings) Validate() error {
	switch s.Mode {
	case ModeOff, ModeDerive, ModeAPIServer:
	default:
		return fmt.Errorf("--workloads %q: want %s, %s or %s", s.Mode, ModeDerive, ModeAPIServer, ModeOff)
	}
	if s.Slice && s.Mode != ModeAPIServer {
		return fmt.Errorf("the node view keeps the owners of the node's pods from the API server: it needs --workloads=%s, not %q", ModeAPIServer, s.Mode)
	}
	if s.Refresh < 0 || s.StaleAfter < 0 {
		return fmt.Errorf("--workload-refresh and --workload-stale-after cannot be negative")
	}
	return nil
}

// NewResolver returns the Resolver s describes, nil for ModeOff, its
// metrics registered with reg (nil registers none). With
// ModeAPIServer it asks the API server of the kubeconfig file, or of the
// in-cluster configuration when kubeconfig is empty, at most 5 gets a
// second (bursts of 10).
func (s Settings) NewResolver(kubeconfig string, logger *slog.Logger, reg prometheus.Registerer) (*Resolver, error) {
	opts := []Option{WithLogger(logger), WithRegisterer(reg)}
	switch s.Mode {
	case ModeOff:
		return nil, nil
	case ModeAPIServer:
		var (
			cfg *rest.Config
			err error
		)
		if kubeconfig == "" {
			cfg, err = rest.InClusterConfig()
		} else {
			cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
		}
		if err != nil {
			return nil, fmt.Errorf("--workloads=apiserver: %w", err)
		}
		cfg.QPS, cfg.Burst, cfg.UserAgent = 5, 10, "podsapi-server"
		newGetter := NewGetter
		if s.Slice {
			newGetter = NewObjectGetter
			opts = append(opts, WithSlice())
		}
		g, err := newGetter(cfg)
		if err != nil {
			return nil, err
		}
		opts = append(opts, WithGetter(g))
	}
	if s.Refresh > 0 {
		opts = append(opts, WithRefreshInterval(s.Refresh))
	}
	if s.StaleAfter > 0 {
		opts = append(opts, WithStaleAfter(s.StaleAfter))
	}
	return NewResolver(opts...), nil
}
