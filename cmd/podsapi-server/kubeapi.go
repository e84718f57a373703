package main

import (
	"errors"
	"fmt"
	"github.com/spf13/pflag"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podsapi/podsapi/guard"
	"github.com/podsapi/podsapi/kubeapi"
	"github.com/podsapi/podsapi/kubeapi/door"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/socket"
	"github.com/podsapi/podsapi/store"
)

// kubeAPIFlags are the flags of the Kubernetes API that podsapi serves the
// node's pods on (package kubeapi), behind its front door (kubeapi/door).
type kubeAPIFlags struct {
	address, certFile, keyFile, socket, clientCAFile string
	tokenTTL, allowTTL, denyTTL                      time.Duration
}

// addKubeAPIFlags defines the flags of the Kubernetes API on fs.
func addKubeAPIFlags(fs *pflag.FlagSet) *kubeAPIFlags {
	f := &kubeAPIFlags{}
	fs.StringVar(&f.address, "kube-api-address", "", "HOST:PORT to serve the node's pods on through the Kubernetes API, over HTTPS (needs --kube-api-tls-cert-file and --kube-api-tls-private-key-file); other requests are passed to the API server of --kubeconfig, or of the in-cluster configuration; empty: none (docs/kubeapi-door.md)")
	fs.StringVar(&f.certFile, "kube-api-tls-cert-file", "", "serving certificate (PEM, with its chain) of --kube-api-address, reloaded when it changes")
	fs.StringVar(&f.keyFile, "kube-api-tls-private-key-file", "", "private key (PEM) of --kube-api-tls-cert-file, reloaded when it changes")
	fs.StringVar(&f.socket, "kube-api-socket", "", "path of a UNIX socket to serve the Kubernetes API on, over plain HTTP, to the peers --allowed-uids and --allowed-gids allow, without credentials; empty: none")
	fs.StringVar(&f.clientCAFile, "kube-api-client-ca-file", "", "accept client certificates signed by a CA of this file on --kube-api-address, as the kubelet's --client-ca-file (their requests for the node's pods only: a certificate cannot be passed to the API server)")
	fs.DurationVar(&f.tokenTTL, "kube-api-authentication-cache-ttl", door.DefaultTokenCacheTTL, "how long the API server's answer to a TokenReview is cached, and so keeps working while the API server is unreachable")
	fs.DurationVar(&f.allowTTL, "kube-api-authorization-cache-authorized-ttl", door.DefaultAllowCacheTTL, "how long a SubjectAccessReview that allowed is cached, and so keeps working while the API server is unreachable")
	fs.DurationVar(&f.denyTTL, "kube-api-authorization-cache-unauthorized-ttl", door.DefaultDenyCacheTTL, "how long a SubjectAccessReview that did not allow is cached")
	return f
}

// enabled reports whether the Kubernetes API is served.
func (f *kubeAPIFlags) enabled() bool { return f.address != "" || f.socket != "" }

// check returns the usage errors of the flags.
func (f *kubeAPIFlags) check() error {
	switch {
	case f.address != "" && (f.certFile == "" || f.keyFile == ""):
		return errors.New("--kube-api-address needs --kube-api-tls-cert-file and --kube-api-tls-private-key-file: client-go and kubectl send their credentials only over TLS")
	case !f.enabled() && (f.certFile != "" || f.keyFile != "" || f.clientCAFile != ""):
		return errors.New("--kube-api-tls-cert-file, --kube-api-tls-private-key-file and --kube-api-client-ca-file need --kube-api-address")
	case f.clientCAFile != "" && f.address == "":
		return errors.New("--kube-api-client-ca-file needs --kube-api-address")
	case len(f.socket) > socket.MaxPathLen:
		return fmt.Errorf("--kube-api-socket %s is %d bytes: %w", f.socket, len(f.socket), socket.ErrPathTooLong)
	}
	for name, d := range map[string]time.Duration{"kube-api-authentication-cache-ttl": f.tokenTTL, "kube-api-authorization-cache-authorized-ttl": f.allowTTL, "kube-api-authorization-cache-unauthorized-ttl": f.denyTTL} {
		if d <= 0 {
			return fmt.Errorf("--%s must be positive", name)
		}
	}
	return nil
}

// upstream returns the configuration of the API server that the door
// passes requests to and asks for reviews, with podsapi's own credentials:
// the kubeconfig file, else the in-cluster configuration when podsapi runs
// in a pod, else nil.
func upstream(kubeconfig string) (*rest.Config, error) {
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

// kubeAPI is the Kubernetes API, built from the flags.
type kubeAPI struct {
	door   *door.Door
	server *door.Server
	auth   *door.Auth // nil without an API server
}

// newKubeAPI builds the Kubernetes API of the node's pods in st, behind its
// door: listeners, authentication and authorization against the API server
// of kubeconfig (or the in-cluster configuration), and the pass-through to
// it; socket peers are allowed as access allows them on the gRPC socket.
func (f *kubeAPIFlags) newKubeAPI(st *store.Store, node, kubeconfig string, access server.AccessConfig, maxWatches int, shutdown time.Duration, logger *slog.Logger, reg prometheus.Registerer) (*kubeAPI, error) {
	up, err := upstream(kubeconfig)
	if err != nil {
		return nil, err
	}
	var (
		opts      []door.Option
		localOpts []kubeapi.Option
		k         = &kubeAPI{}
	)
	if up == nil {
		// Without an API server, discovery is answered here (pods only).
		localOpts = append(localOpts, kubeapi.WithDiscovery())
		logger.Warn("the Kubernetes API has no API server: only the node's pods are served, only to the peers of --kube-api-socket")
	} else {
		own := rest.CopyConfig(up)
		own.UserAgent = "podsapi-server"
		own.QPS, own.Burst = 50, 100
		var authOpts []door.AuthOption
		authOpts = append(authOpts, door.WithCacheTTLs(f.tokenTTL, f.allowTTL, f.denyTTL))
		if f.clientCAFile != "" {
			authOpts = append(authOpts, door.WithClientCAFile(f.clientCAFile))
		}
		if k.auth, err = door.NewAuth(own, authOpts...); err != nil {
			return nil, fmt.Errorf("--kube-api-client-ca-file: %w", err)
		}
		pass, err := door.NewPassThrough(up)
		if err != nil {
			return nil, err
		}
		opts = append(opts, door.WithAuth(k.auth), door.WithPassThrough(pass))
	}
	uids := access.AllowedUIDs
	if uids == nil {
		uids = server.DefaultAllowedUIDs()
	}
	opts = append(opts, door.WithRegisterer(reg), door.WithLogger(logger), door.WithMaxWatches(maxWatches),
		door.WithPeerPolicy(&guard.AccessPolicy{AnyPeer: access.AllowAnyPeer, UIDs: uids, GIDs: access.AllowedGIDs}))
	k.door = door.New(kubeapi.New(st, node, localOpts...), opts...)

	cfg := door.Config{
		Address: f.address, CertFile: f.certFile, KeyFile: f.keyFile, ClientCertificates: f.clientCAFile != "",
		Socket: f.socket, ShutdownTimeout: shutdown, Logger: logger,
	}
	if cfg.SocketOptions, err = access.SocketOptions(); err != nil {
		return nil, err
	}
	if k.server, err = door.Listen(cfg); err != nil {
		return nil, fmt.Errorf("Kubernetes API: %w (choose another --kube-api-address or --kube-api-socket)", err)
	}
	return k, nil
}
