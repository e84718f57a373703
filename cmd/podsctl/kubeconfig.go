package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"
)

// The defaults of podsctl kubeconfig: the Service of deploy's component
// kube-api, and the token of a pod's service account, which client-go
// reads again as it rotates.
const (
	defaultKubeAPIServer = "https://podsapi-kube-api.podsapi.svc"
	defaultTokenFile     = "/var/run/secrets/kubernetes.io/serviceaccount/token"
)

// The views of podsctl kubeconfig --view (docs/kubeapi.md, "Two views").
const (
	// viewFull is the door's URL itself: every answer is the API
	// server's, the node's pods, namespaces and node answered by podsapi.
	viewFull = "full"
	// viewNode is nodeViewPath under the door's URL: every list holds the
	// node's slice only.
	viewNode = "node"
	// nodeViewPath is the path of the node view under the door's URL:
	// client-go asks <door>/views/node/api/v1/... of it.
	nodeViewPath = "/views/node"
)

// kubeconfigOptions are the flags of podsctl kubeconfig.
type kubeconfigOptions struct {
	server, ca, tokenFile, namespace, view string
	embed                                  bool
}

// kubeconfigCommand returns podsctl kubeconfig, which prints a kubeconfig
// for an agent pointing at the node's podsapi (podsapi-server
// --kube-api-address).
func (a *app) kubeconfigCommand() *cobra.Command {
	var ko kubeconfigOptions
	cmd := &cobra.Command{
		Use:   "kubeconfig --certificate-authority FILE [flags]",
		Short: "Print a kubeconfig that points an agent at the node's podsapi",
		Long: `Print a kubeconfig for an agent whose client-go informers, kubectl or /pods
poller should read the node's pods from podsapi's Kubernetes API
(podsapi-server --kube-api-address; deploy/components/kube-api) instead of
the API server. podsapi answers the node's pods itself and passes every
other request to the API server with the agent's own token, so the agent
keeps working for all it does. The agent authenticates with its service
account's token (read again from --token-file as it rotates), and checks
podsapi's serving certificate against --certificate-authority: the CA that
signed it, not the cluster's (see docs/kubeapi-door.md).

--view chooses what the agent sees (docs/kubeapi.md, "Two views"): full (the
default) answers as the API server does; node answers every list with the
node's slice only (its pods, their namespaces, the node, the owners of its
pods up the chain), so that an agent that watches them cluster-wide costs
the API server nothing more.`,
		Example: `  podsctl kubeconfig --certificate-authority /etc/podsapi/kube-api-ca/ca.crt > kubeconfig
  podsctl kubeconfig --server https://10.0.0.7:10266 --certificate-authority ca.crt --embed-certs
  podsctl kubeconfig --view node --certificate-authority /etc/podsapi/kube-api-ca/ca.crt > kubeconfig`,
		Args:              noArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(*cobra.Command, []string) error {
			a.ran = true
			return writeKubeconfig(ko, a.stdout)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&ko.server, "server", defaultKubeAPIServer, "URL of podsapi's Kubernetes API (the Service of deploy/components/kube-api, local to each node)")
	fs.StringVar(&ko.ca, "certificate-authority", "", "file of the CA that signed podsapi's serving certificate (required)")
	fs.BoolVar(&ko.embed, "embed-certs", false, "embed the CA's certificates in the kubeconfig instead of naming the file")
	fs.StringVar(&ko.tokenFile, "token-file", defaultTokenFile, "file of the agent's bearer token (empty: no credentials)")
	fs.StringVarP(&ko.namespace, "namespace", "n", "", "default namespace of the context")
	fs.StringVar(&ko.view, "view", viewFull, "what the agent sees: full (every answer the API server's) or node (every list the node's slice: its pods, their namespaces, the node, their owners; the path "+nodeViewPath+" under --server; podsapi-server --kube-api-node-view)")
	_ = cmd.MarkFlagFilename("certificate-authority", "crt", "pem")
	_ = cmd.RegisterFlagCompletionFunc("view", cobra.FixedCompletions([]string{viewFull, viewNode}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// writeKubeconfig writes the kubeconfig of ko to w.
func writeKubeconfig(ko kubeconfigOptions, w io.Writer) error {
	if ko.ca == "" {
		return usageError{error: errors.New("--certificate-authority is required: the CA that signed podsapi's serving certificate (docs/kubeapi-door.md)")}
	}
	server, err := viewServer(ko.server, ko.view)
	if err != nil {
		return err
	}
	cluster := clientcmdv1.Cluster{Server: server}
	if ko.embed {
		data, err := os.ReadFile(ko.ca)
		if err != nil {
			return fmt.Errorf("--certificate-authority: %w", err)
		}
		cluster.CertificateAuthorityData = data
	} else {
		cluster.CertificateAuthority = ko.ca
	}
	const name = "podsapi"
	cfg := clientcmdv1.Config{
		APIVersion:     "v1",
		Kind:           "Config",
		Clusters:       []clientcmdv1.NamedCluster{{Name: name, Cluster: cluster}},
		AuthInfos:      []clientcmdv1.NamedAuthInfo{{Name: name, AuthInfo: clientcmdv1.AuthInfo{TokenFile: ko.tokenFile}}},
		Contexts:       []clientcmdv1.NamedContext{{Name: name, Context: clientcmdv1.Context{Cluster: name, AuthInfo: name, Namespace: ko.namespace}}},
		CurrentContext: name,
	}
	out, err := yaml.Marshal(&cfg)
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// viewServer returns the server URL of the view named view of the door at
// server: server itself for the full view, the node view's path under it
// for the node view.
func viewServer(server, view string) (string, error) {
	switch view {
	case viewFull:
		return server, nil
	case viewNode:
		u, err := url.Parse(server)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return "", usageError{error: fmt.Errorf("--server %q: want the URL of podsapi's Kubernetes API, such as %s", server, defaultKubeAPIServer)}
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return "", usageError{error: fmt.Errorf("--server %q: a server URL has no query or fragment", server)}
		}
		return strings.TrimSuffix(server, "/") + nodeViewPath, nil
	}
	return "", usageError{error: fmt.Errorf("--view %q: want %s or %s", view, viewFull, viewNode)}
}
