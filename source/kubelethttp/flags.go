package kubelethttp

import (
	"errors"
	"flag"

	"github.com/podsapi/podsapi/source"
)

// Registration offers the source on podsapi-server's command line, as
// --source=kubelet-http with the --kubelet-* flags.
var Registration = source.Registration{
	Name: "kubelet-http",
	Help: "the kubelet's /pods endpoint",
	Flags: func(fs *flag.FlagSet) func(source.Env) (source.Source, error) {
		url := fs.String("kubelet-url", DefaultURL,
			"kubelet-http: URL of the kubelet's /pods endpoint (the read-only port is http://127.0.0.1:10255/pods)")
		host := fs.String("kubelet-host", "",
			"kubelet-http: host (name or IP address; IPv6 with or without brackets) that replaces the host of --kubelet-url, keeping its port and path, such as the node's IP from the downward API")
		interval := fs.Duration("kubelet-poll-interval", DefaultInterval, "kubelet-http: time between two polls")
		tokenFile := fs.String("kubelet-token-file", "", "kubelet-http: file holding a bearer token, read again at each poll")
		caFile := fs.String("kubelet-ca-file", "",
			"kubelet-http: PEM file of the certificate authorities of the kubelet's serving certificate (default: the system's)")
		insecure := fs.Bool("kubelet-insecure-skip-verify", false, "kubelet-http: do not verify the kubelet's serving certificate")
		clientCert := fs.String("kubelet-client-cert", "", "kubelet-http: PEM client certificate to authenticate to the kubelet with")
		clientKey := fs.String("kubelet-client-key", "", "kubelet-http: PEM key of --kubelet-client-cert")
		maxBody := fs.Int64("kubelet-max-body-bytes", 0,
			"kubelet-http: largest /pods body, counted after decompression (0: a tenth of the memory limit, 4 MiB to 256 MiB)")
		return func(env source.Env) (source.Source, error) {
			if *maxBody < 0 {
				return nil, errors.New("--kubelet-max-body-bytes must not be negative (0 means the default)")
			}
			if *interval < 0 {
				return nil, errors.New("--kubelet-poll-interval must not be negative (0 means the default)")
			}
			if (*clientCert == "") != (*clientKey == "") {
				return nil, errors.New("--kubelet-client-cert and --kubelet-client-key go together")
			}
			return New(
				WithURL(*url),
				WithHost(*host),
				WithInterval(*interval),
				WithMaxBodyBytes(*maxBody),
				WithTokenFile(*tokenFile),
				WithCAFile(*caFile),
				WithInsecureSkipVerify(*insecure),
				WithClientCert(*clientCert, *clientKey),
				WithLogger(env.Logger),
				WithRegisterer(env.Registerer),
			), nil
		}
	},
}
