package door

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/podsapi/podsapi/socket"
)

// Settings are podsapi-server's settings of its Kubernetes API: where it
// listens, the client CA, and how long the API server's reviews are
// cached. AddFlags binds each to its flag, with its default and help
// written there once (docs/server.md's table is generated from them, with
// server.Config's); Validate says everything that is wrong at once; Open
// assembles the API they describe. The zero value serves nothing.
type Settings struct {
	// Address is the TCP host:port served over HTTPS, with the serving
	// certificate CertFile and its key KeyFile (PEM, reloaded when they
	// change); empty: none.
	Address, CertFile, KeyFile string
	// Socket is the path of a UNIX socket served over plain HTTP to the
	// peers the gRPC socket's access policy allows; empty: none.
	Socket string
	// ClientCAFile holds the CAs whose client certificates are accepted on
	// Address, as the kubelet's --client-ca-file; empty: none.
	ClientCAFile string
	// TokenCacheTTL, AllowCacheTTL and DenyCacheTTL are how long a
	// TokenReview, a SubjectAccessReview that allowed and one that did not
	// are cached (WithCacheTTLs). AddFlags sets them to
	// DefaultTokenCacheTTL, DefaultAllowCacheTTL and DefaultDenyCacheTTL;
	// Validate refuses one that is not positive.
	TokenCacheTTL, AllowCacheTTL, DenyCacheTTL time.Duration
	// Kinds has the door answer the namespaces and the node itself, from
	// one shared watch of each with podsapi's own credentials (Kinds),
	// when it has an API server; false passes them through, as every
	// other kind. AddFlags sets it to true.
	Kinds bool
	// NodeView has the door serve the node view under NodeViewPath, from
	// the node's slice (Env.Slice) and the Kinds' node, when it has an API
	// server; false leaves that path to the API server, which answers it
	// 404. AddFlags sets it to true; podsapi-server turns it off when the
	// slice cannot be kept (NodeViewNeeds).
	NodeView bool
}

// NodeViewNeeds names what the node view needs besides its own flag, for
// the errors and help that mention it: the node's slice comes from the
// workload resolution against the API server, and the node from the shared
// kinds.
const NodeViewNeeds = "--kube-api-address or --kube-api-socket, --kube-api-shared-kinds and --workloads=apiserver"

// AddFlags binds every field of s to its flag of fs, under the names that
// podsapi-server's users type.
func (s *Settings) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&s.Address, "kube-api-address", "", "HOST:PORT to serve the node's pods on through the Kubernetes API, over HTTPS (needs --kube-api-tls-cert-file and --kube-api-tls-private-key-file); other requests are passed to the API server of --kubeconfig, or of the in-cluster configuration; empty: none (docs/kubeapi-door.md)")
	fs.StringVar(&s.CertFile, "kube-api-tls-cert-file", "", "serving certificate (PEM, with its chain) of --kube-api-address, reloaded when it changes")
	fs.StringVar(&s.KeyFile, "kube-api-tls-private-key-file", "", "private key (PEM) of --kube-api-tls-cert-file, reloaded when it changes")
	fs.StringVar(&s.Socket, "kube-api-socket", "", "path of a UNIX socket to serve the Kubernetes API on, over plain HTTP, to the peers --allowed-uids and --allowed-gids allow, without credentials; empty: none")
	fs.StringVar(&s.ClientCAFile, "kube-api-client-ca-file", "", "accept client certificates signed by a CA of this file on --kube-api-address, as the kubelet's --client-ca-file (their requests for the node's pods only: a certificate cannot be passed to the API server)")
	fs.DurationVar(&s.TokenCacheTTL, "kube-api-authentication-cache-ttl", DefaultTokenCacheTTL, "how long the API server's answer to a TokenReview is cached, and so keeps working while the API server is unreachable")
	fs.DurationVar(&s.AllowCacheTTL, "kube-api-authorization-cache-authorized-ttl", DefaultAllowCacheTTL, "how long a SubjectAccessReview that allowed is cached, and so keeps working while the API server is unreachable")
	fs.DurationVar(&s.DenyCacheTTL, "kube-api-authorization-cache-unauthorized-ttl", DefaultDenyCacheTTL, "how long a SubjectAccessReview that did not allow is cached")
	fs.BoolVar(&s.Kinds, "kube-api-shared-kinds", true, "answer lists, gets and watches of namespaces and of this node (/api/v1/nodes/<node>, or fieldSelector metadata.name=<node>) from one shared watch of each with podsapi's own credentials (RBAC: get, list, watch of namespaces and nodes), authorized for each caller as the API server would; false passes them to the API server (docs/kubeapi.md)")
	fs.BoolVar(&s.NodeView, "kube-api-node-view", true, "serve the node view under "+NodeViewPath+" (podsctl kubeconfig --view node): every list and watch the node's slice (its pods, their namespaces, the node, their owners up the chain), each owner got once per --workload-refresh, never a cluster-wide watch; needs "+NodeViewNeeds+" (without them it is off, unless set explicitly, which is then an error) (docs/kubeapi.md, Two views)")
}

// Enabled reports whether s serves the Kubernetes API: on an address, a
// socket or both.
func (s Settings) Enabled() bool { return s.Address != "" || s.Socket != "" }

// Validate returns every error of s at once, each naming its flag, or nil.
func (s Settings) Validate() error {
	var errs []error
	switch {
	case s.Address != "" && (s.CertFile == "" || s.KeyFile == ""):
		errs = append(errs, errors.New("--kube-api-address needs --kube-api-tls-cert-file and --kube-api-tls-private-key-file: client-go and kubectl send their credentials only over TLS"))
	case !s.Enabled() && (s.CertFile != "" || s.KeyFile != "" || s.ClientCAFile != ""):
		errs = append(errs, errors.New("--kube-api-tls-cert-file, --kube-api-tls-private-key-file and --kube-api-client-ca-file need --kube-api-address"))
	case s.ClientCAFile != "" && s.Address == "":
		errs = append(errs, errors.New("--kube-api-client-ca-file needs --kube-api-address"))
	}
	if len(s.Socket) > socket.MaxPathLen {
		errs = append(errs, fmt.Errorf("--kube-api-socket %s is %d bytes: %w", s.Socket, len(s.Socket), socket.ErrPathTooLong))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"kube-api-authentication-cache-ttl", s.TokenCacheTTL},
		{"kube-api-authorization-cache-authorized-ttl", s.AllowCacheTTL},
		{"kube-api-authorization-cache-unauthorized-ttl", s.DenyCacheTTL},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("--%s must be positive", d.name))
		}
	}
	return errors.Join(errs...)
}
