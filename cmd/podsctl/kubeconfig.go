package main

import (
	"errors"
	"fmt"
	"io"
	"os"

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

// kubeconfigOptions are the flags of podsctl kubeconfig.
type kubeconfigOptions struct {
	server, ca, tokenFile, namespace string
	embed                            bool
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
signed it, not the cluster's (see docs/kubeapi-door.md).`,
		Example: `  podsctl kubeconfig --certificate-authority /etc/podsapi/kube-api-ca/ca.crt > kubeconfig
  podsctl kubeconfig --server https://10.0.0.7:10266 --certificate-authority ca.crt --embed-certs`,
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
	_ = cmd.MarkFlagFilename("certificate-authority", "crt", "pem")
	return cmd
}

// writeKubeconfig writes the kubeconfig of ko to w.
func writeKubeconfig(ko kubeconfigOptions, w io.Writer) error {
	if ko.ca == "" {
		return usageError{error: errors.New("--certificate-authority is required: the CA that signed podsapi's serving certificate (docs/kubeapi-door.md)")}
	}
	cluster := clientcmdv1.Cluster{Server: ko.server}
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
