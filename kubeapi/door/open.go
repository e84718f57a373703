package door

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podsapi/podsapi/guard"
	"github.com/podsapi/podsapi/kubeapi"
	"github.com/podsapi/podsapi/socket"
)

// Env is what the Kubernetes API takes from the server it serves beside:
// not settings of its own.
type Env struct {
	// Pods are the node's pods (the server's store).
	Pods kubeapi.PodReader
	// Node is the name of the node.
	Node string
	// Kubeconfig is the path of the kubeconfig file of the API server that
	// requests are passed to and reviews sent to (Upstream).
	Kubeconfig string
	// Peers are the peers of the socket that may call: the gRPC socket's
	// access policy. Nil: root only (WithPeerPolicy).
	Peers *guard.AccessPolicy
	// SocketOptions set the socket's mode and group, as the gRPC socket's.
	SocketOptions []socket.Option
	// MaxWatches bounds the watches open at once, local and passed
	// through, MaxWatchesPerCaller those of one caller (WithMaxWatches; 0
	// or negative: no bound).
	MaxWatches, MaxWatchesPerCaller int
	// ShutdownTimeout bounds a graceful shutdown (Config).
	ShutdownTimeout time.Duration
	// Slice is the node's slice the node view answers from
	// (Settings.NodeView): a workload.Resolver with workload.WithSlice.
	// Nil: no node view.
	Slice Slice
	// Logger receives the API's logs. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives the door's metrics. Default none.
	Registerer prometheus.Registerer
}

// API is the Kubernetes API that Open assembles: its Door, the listeners
// that serve it and, with an API server, how callers are verified.
type API struct {
	Door   *Door
	Server *Server
	// Auth is nil without an API server.
	Auth *Auth
	// Kinds are the namespaces and the node the door answers itself; nil
	// without an API server or with Settings.Kinds false.
	Kinds *Kinds

	// nodeView is the node view (Settings.NodeView); nil: none.
	nodeView *nodeView
	logger   *slog.Logger
}

// Upstream returns the configuration of the API server that the door
// passes requests to and asks for reviews, with podsapi's own credentials:
// the kubeconfig file, else the in-cluster configuration when podsapi runs
// in a pod, else nil.
func Upstream(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig: %w", err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if errors.Is(err, rest.ErrNotInCluster) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the in-cluster configuration: %w", err)
	}
	return cfg, nil
}

// Open assembles the Kubernetes API of env's pods that s describes, behind
// its door, and opens its listeners: authentication and authorization
// against the Upstream API server of env.Kubeconfig and the pass-through
// to it; without an API server, discovery is answered locally (pods only)
// and only the socket's peers are served. Its errors name the flags to
// change.
func (s Settings) Open(env Env) (*API, error) {
	if env.Logger == nil {
		env.Logger = slog.Default()
	}
	up, err := Upstream(env.Kubeconfig)
	if err != nil {
		return nil, err
	}
	var (
		opts      []Option
		localOpts []kubeapi.Option
		a         = &API{logger: env.Logger}
	)
	if up == nil {
		localOpts = append(localOpts, kubeapi.WithDiscovery())
		env.Logger.Warn("the Kubernetes API has no API server: only the node's pods are served, only to the peers of --kube-api-socket")
	} else {
		own := rest.CopyConfig(up)
		own.UserAgent = "podsapi-server"
		own.QPS, own.Burst = 50, 100
		authOpts := []AuthOption{WithCacheTTLs(s.TokenCacheTTL, s.AllowCacheTTL, s.DenyCacheTTL)}
		if s.ClientCAFile != "" {
			authOpts = append(authOpts, WithClientCAFile(s.ClientCAFile))
		}
		if a.Auth, err = NewAuth(own, authOpts...); err != nil {
			return nil, fmt.Errorf("--kube-api-client-ca-file: %w", err)
		}
		pass, err := NewPassThrough(up)
		if err != nil {
			return nil, err
		}
		opts = append(opts, WithAuth(a.Auth), WithPassThrough(pass))
		if s.Kinds {
			if a.Kinds, err = newKinds(own, env.Node, env.Logger); err != nil {
				return nil, fmt.Errorf("--kube-api-shared-kinds: %w", err)
			}
			localOpts = append(localOpts, a.Kinds.options()...)
			if env.Registerer != nil {
				env.Registerer.MustRegister(a.Kinds.collectors()...)
			}
		}
	}
	if env.Peers != nil {
		opts = append(opts, WithPeerPolicy(env.Peers))
	}
	opts = append(opts, WithRegisterer(env.Registerer), WithLogger(env.Logger), WithMaxWatches(env.MaxWatches, env.MaxWatchesPerCaller))
	// The Local side tells the door how its watches end, for its metrics
	// and logs.
	var d *Door
	watchEnded := kubeapi.WithWatchEnded(func(r *http.Request, end kubeapi.WatchEnd) { d.WatchEnded(r, end) })
	localOpts = append(localOpts, watchEnded)
	if s.NodeView && up != nil {
		if a.Kinds == nil || env.Slice == nil {
			return nil, fmt.Errorf("--kube-api-node-view needs %s", NodeViewNeeds)
		}
		if a.nodeView, err = newNodeView(env.Pods, env.Node, a.Kinds.Node, env.Slice, watchEnded); err != nil {
			return nil, err
		}
		opts = append(opts, WithNodeView(a.nodeView.handler))
	}
	d = New(kubeapi.New(env.Pods, env.Node, localOpts...), opts...)
	a.Door = d
	a.Server, err = Listen(Config{
		Address: s.Address, CertFile: s.CertFile, KeyFile: s.KeyFile, ClientCertificates: s.ClientCAFile != "",
		Socket: s.Socket, SocketOptions: env.SocketOptions, ShutdownTimeout: env.ShutdownTimeout, Logger: env.Logger,
		Registerer: env.Registerer,
	})
	if err != nil {
		return nil, fmt.Errorf("Kubernetes API: %w (choose another --kube-api-address or --kube-api-socket)", err)
	}
	return a, nil
}

// Addr returns the address of the HTTPS listener, or nil without one.
func (a *API) Addr() net.Addr { return a.Server.Addr() }

// Close closes the listeners of an API that is not served.
func (a *API) Close() { a.Server.Close() }

// Serve serves the door until ctx is done, as Server.Serve does. With an
// API server, it first asks in the background whether podsapi may verify
// its callers (Auth.Check, bounded to 30 s) and warns when it may not, and
// runs the watches of the Kinds and the feed of the node view until it
// returns.
func (a *API) Serve(ctx context.Context) error {
	for _, run := range []func(context.Context){a.runKinds, a.runNodeView} {
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			run(rctx)
		}()
		defer func() {
			cancel()
			<-done
		}()
	}
	if a.Auth != nil {
		go func() {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := a.Auth.Check(cctx); err != nil {
				a.logger.Warn("the Kubernetes API cannot verify its callers", "error", err)
			}
		}()
	}
	return a.Server.Serve(ctx, a.Door)
}

// runKinds runs the watches of the Kinds, if any, until ctx is done.
func (a *API) runKinds(ctx context.Context) {
	if a.Kinds != nil {
		a.Kinds.Run(ctx)
	}
}

// runNodeView feeds the node view's stores from the slice, if it is
// served, until ctx is done.
func (a *API) runNodeView(ctx context.Context) {
	if a.nodeView != nil {
		a.nodeView.Run(ctx)
	}
}
