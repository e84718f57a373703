package main

import (
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func TestKubeconfig(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	caPEM := []byte("-----BEGIN CERTIFICATE-----\nMIIBdzCCAR2gAwIBAgIBATAKBggqhkjOPQQDAjAAMB4XDTI2MDEwMTAwMDAwMFoXDTI3MDEwMTAwMDAwMFowADBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABA==\n-----END CERTIFICATE-----\n")
	if err := os.WriteFile(ca, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("t0ken"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name              string
		args              []string
		host, caFile, tok string
		caData            bool
		namespace         string
	}{
		{"Defaults", []string{"--certificate-authority", ca}, defaultKubeAPIServer, ca, defaultTokenFile, false, ""},
		{"Embedded", []string{"--certificate-authority", ca, "--embed-certs", "--server", "https://10.0.0.7:10266", "--token-file", token, "-n", "agents"}, "https://10.0.0.7:10266", "", token, true, "agents"},
		{"FullView", []string{"--certificate-authority", ca, "--view", "full"}, defaultKubeAPIServer, ca, defaultTokenFile, false, ""},
		{"NodeView", []string{"--certificate-authority", ca, "--view", "node"}, defaultKubeAPIServer + "/views/node", ca, defaultTokenFile, false, ""},
		{"NodeViewOfAServerWithASlash", []string{"--certificate-authority", ca, "--embed-certs", "--view", "node", "--server", "https://10.0.0.7:10266/", "--token-file", token},
			"https://10.0.0.7:10266/views/node", "", token, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := run(t, append([]string{"kubeconfig"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			raw := mustLoad(t, out)
			cluster, user, ctx := raw.Clusters["podsapi"], raw.AuthInfos["podsapi"], raw.Contexts[raw.CurrentContext]
			if cluster == nil || user == nil || ctx == nil || ctx.Cluster != "podsapi" || ctx.AuthInfo != "podsapi" {
				t.Fatalf("no podsapi cluster, user and current context:\n%s", out)
			}
			if cluster.Server != tc.host || cluster.CertificateAuthority != tc.caFile || (len(cluster.CertificateAuthorityData) > 0) != tc.caData ||
				user.TokenFile != tc.tok || ctx.Namespace != tc.namespace {
				t.Fatalf("server %s, CA file %q, CA data %d bytes, token file %q, namespace %q:\n%s",
					cluster.Server, cluster.CertificateAuthority, len(cluster.CertificateAuthorityData), user.TokenFile, ctx.Namespace, out)
			}
			if !tc.caData {
				return
			}
			// client-go reads it as any kubeconfig, token and CA included.
			cfg, err := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{}).ClientConfig()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.host || string(cfg.CAData) != string(caPEM) || cfg.BearerTokenFile != token {
				t.Fatalf("client-go reads host %s, CA %q, token file %q", cfg.Host, cfg.CAData, cfg.BearerTokenFile)
			}
		})
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"NoCA", nil, "--certificate-authority is required"},
		{"UnknownView", []string{"--certificate-authority", ca, "--view", "cluster"}, `--view "cluster": want full or node`},
		{"NodeViewOfNoURL", []string{"--certificate-authority", ca, "--view", "node", "--server", "10.0.0.7:10266"}, `--server "10.0.0.7:10266": want the URL`},
		{"NodeViewOfAQuery", []string{"--certificate-authority", ca, "--view", "node", "--server", "https://10.0.0.7:10266/?x=1"}, "no query or fragment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := run(t, append([]string{"kubeconfig"}, tc.args...)...)
			if code != exitUsage || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d (%s), want %d saying %q", code, errOut, exitUsage, tc.want)
			}
		})
	}
}

// TestKubeconfigNodeViewRequests checks that an unchanged client-go, given
// the kubeconfig of --view node, sends its requests under the node view's
// path of the door: a typed client's list of namespaces and a discovery
// request reach an HTTPS server at /views/node/api/v1/namespaces and
// /views/node/api, with the token of the kubeconfig's file.
func TestKubeconfigNodeViewRequests(t *testing.T) {
	var (
		mu    sync.Mutex
		paths []string
		auth  []string
	)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/views/node/api/v1/namespaces":
			_, _ = io.WriteString(w, `{"kind":"NamespaceList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"shop"}}]}`)
		case "/views/node/api":
			_, _ = io.WriteString(w, `{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("t0ken"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "kubeconfig", "--view", "node", "--server", srv.URL, "--certificate-authority", ca, "--token-file", token)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*mustLoad(t, out), &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "shop" {
		t.Fatalf("namespaces %+v, want shop", list.Items)
	}
	if _, err := cs.Discovery().ServerGroups(); err != nil {
		t.Logf("discovery: %v (the test server serves /api only)", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(paths, "/views/node/api/v1/namespaces") || !slices.Contains(paths, "/views/node/api") {
		t.Errorf("paths %v, want /views/node/api/v1/namespaces and /views/node/api", paths)
	}
	for i, a := range auth {
		if a != "Bearer t0ken" {
			t.Errorf("request %s with Authorization %q, want the kubeconfig's token", paths[i], a)
		}
	}
}

func mustLoad(t *testing.T, kubeconfig string) *clientcmdapi.Config {
	t.Helper()
	cfg, err := clientcmd.Load([]byte(kubeconfig))
	if err != nil {
		t.Fatalf("%v:\n%s", err, kubeconfig)
	}
	return cfg
}
