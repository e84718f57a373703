package kubetest

import (
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Server is a server a kubeconfig reaches over HTTPS: the name of its
// cluster and context in the file, its host:port, and the file of the CA
// that verifies its certificate.
type Server struct {
	Name, Host, CAFile string
}

// WriteKubeconfig writes to path (mode 0600) a kubeconfig of user, who
// presents token as a bearer token, with a cluster and a context per
// server, named as the server, the first server's context being current;
// it returns path. The file is written by client-go's clientcmd, as kubectl
// writes its own.
func WriteKubeconfig(t testing.TB, path, user, token string, servers ...Server) string {
	t.Helper()
	if len(servers) == 0 {
		t.Fatal("kubetest.WriteKubeconfig: no server")
	}
	cfg := clientcmdapi.NewConfig()
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	for _, s := range servers {
		cfg.Clusters[s.Name] = &clientcmdapi.Cluster{Server: "https://" + s.Host, CertificateAuthority: s.CAFile}
		cfg.Contexts[s.Name] = &clientcmdapi.Context{Cluster: s.Name, AuthInfo: user}
	}
	cfg.CurrentContext = servers[0].Name
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatalf("kubeconfig %s: %v", path, err)
	}
	return path
}
