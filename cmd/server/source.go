package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/internal/h2c"
	"github.com/podsapi/podsapi/source"
	"github.com/podsapi/podsapi/source/kubeletgrpc"
	"github.com/podsapi/podsapi/source/kubelethttp"
	"github.com/podsapi/podsapi/source/manifest"
)

// The values of --source.
const (
	sourceManifest    = "manifest"
	sourceKubeletHTTP = "kubelet-http"
	sourceKubeletGRPC = "kubelet-grpc"
)

var sourceKinds = []string{sourceManifest, sourceKubeletHTTP, sourceKubeletGRPC}

// flagSources names, for each flag that belongs to one source, that source.
var flagSources = map[string]string{
	"manifest-dir":                 sourceManifest,
	"max-manifest-bytes":           sourceManifest,
	"kubelet-url":                  sourceKubeletHTTP,
	"kubelet-poll-interval":        sourceKubeletHTTP,
	"kubelet-token-file":           sourceKubeletHTTP,
	"kubelet-ca-file":              sourceKubeletHTTP,
	"kubelet-insecure-skip-verify": sourceKubeletHTTP,
	"kubelet-client-cert":          sourceKubeletHTTP,
	"kubelet-client-key":           sourceKubeletHTTP,
	"source-socket":                sourceKubeletGRPC,
	"source-resync-interval":       sourceKubeletGRPC,
}

// sourceFlags are the command-line flags that choose and configure the pod
// source.
type sourceFlags struct {
	kind         *string
	manifestDir  string // Set by Run from --manifest-dir.
	maxManifest  *int64
	kubeletURL   *string
	pollInterval *time.Duration
	tokenFile    *string
	caFile       *string
	insecure     *bool
	clientCert   *string
	clientKey    *string
	sourceSocket *string
	resync       *time.Duration
}

// addSourceFlags defines the source flags on fs, except --manifest-dir.
func addSourceFlags(fs *flag.FlagSet) *sourceFlags {
	return &sourceFlags{
		kind: fs.String("source", sourceManifest,
			"pod source: manifest (the static pod manifests of --manifest-dir), kubelet-http (the kubelet's /pods endpoint) or kubelet-grpc (the kubelet's own Pods API socket)"),
		maxManifest: fs.Int64("max-manifest-bytes", manifest.DefaultMaxFileBytes,
			"manifest: size cap of a manifest file, and of each YAML document with its aliases expanded; negative for no cap"),
		kubeletURL: fs.String("kubelet-url", kubelethttp.DefaultURL,
			"kubelet-http: URL of the kubelet's /pods endpoint (the read-only port is http://127.0.0.1:10255/pods)"),
		pollInterval: fs.Duration("kubelet-poll-interval", kubelethttp.DefaultInterval, "kubelet-http: time between two polls"),
		tokenFile:    fs.String("kubelet-token-file", "", "kubelet-http: file holding a bearer token, read again at each poll"),
		caFile: fs.String("kubelet-ca-file", "",
			"kubelet-http: PEM file of the certificate authorities of the kubelet's serving certificate (default: the system's)"),
		insecure:   fs.Bool("kubelet-insecure-skip-verify", false, "kubelet-http: do not verify the kubelet's serving certificate"),
		clientCert: fs.String("kubelet-client-cert", "", "kubelet-http: PEM client certificate to authenticate to the kubelet with"),
		clientKey:  fs.String("kubelet-client-key", "", "kubelet-http: PEM key of --kubelet-client-cert"),
		sourceSocket: fs.String("source-socket", kubeletgrpc.DefaultSocket,
			"kubelet-grpc: the kubelet's Pods API socket; --socket must be another path"),
		resync: fs.Duration("source-resync-interval", kubeletgrpc.DefaultResyncInterval,
			"kubelet-grpc: time between two ListPods of the kubelet that find the edits its watch does not report (one token of its rate limit each); negative for none"),
	}
}

// check validates the source flags after parsing; servingSocket is --socket.
func (f *sourceFlags) check(fs *flag.FlagSet, servingSocket string) error {
	if !slices.Contains(sourceKinds, *f.kind) {
		return fmt.Errorf("--source %q: want manifest, kubelet-http or kubelet-grpc", *f.kind)
	}
	var err error
	fs.Visit(func(fl *flag.Flag) {
		if owner, ok := flagSources[fl.Name]; ok && owner != *f.kind && err == nil {
			err = fmt.Errorf("--%s is a flag of --source=%s, not of --source=%s", fl.Name, owner, *f.kind)
		}
	})
	if err != nil {
		return err
	}
	switch *f.kind {
	case sourceManifest:
		if f.manifestDir == "" {
			return errors.New("--manifest-dir is required")
		}
	case sourceKubeletHTTP:
		if *f.pollInterval < 0 {
			return errors.New("--kubelet-poll-interval must not be negative (0 means the default)")
		}
		if (*f.clientCert == "") != (*f.clientKey == "") {
			return errors.New("--kubelet-client-cert and --kubelet-client-key go together")
		}
	case sourceKubeletGRPC:
		if filepath.Clean(h2c.SocketPath(*f.sourceSocket)) == filepath.Clean(servingSocket) {
			return fmt.Errorf("--socket and --source-socket are both %s: serve on another path", servingSocket)
		}
	}
	return nil
}

// newSource makes the pod source the flags choose.
func (f *sourceFlags) newSource(nodeName string, logger *slog.Logger, reg prometheus.Registerer) source.Source {
	switch *f.kind {
	case sourceKubeletHTTP:
		return kubelethttp.New(
			kubelethttp.WithURL(*f.kubeletURL),
			kubelethttp.WithInterval(*f.pollInterval),
			kubelethttp.WithTokenFile(*f.tokenFile),
			kubelethttp.WithCAFile(*f.caFile),
			kubelethttp.WithInsecureSkipVerify(*f.insecure),
			kubelethttp.WithClientCert(*f.clientCert, *f.clientKey),
			kubelethttp.WithLogger(logger),
			kubelethttp.WithRegisterer(reg),
		)
	case sourceKubeletGRPC:
		return kubeletgrpc.New(kubeletgrpc.WithSocket(*f.sourceSocket), kubeletgrpc.WithLogger(logger), kubeletgrpc.WithRegisterer(reg),
			kubeletgrpc.WithResyncInterval(*f.resync))
	default:
		return manifest.New(f.manifestDir, nodeName, manifest.WithLogger(logger), manifest.WithRegisterer(reg),
			manifest.WithMaxFileBytes(*f.maxManifest))
	}
}
