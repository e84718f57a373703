package main

import (
	"os"
	"path/filepath"
	"testing"

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
	t.Run("NoCA", func(t *testing.T) {
		if _, errOut, code := run(t, "kubeconfig"); code != exitUsage {
			t.Fatalf("exit %d (%s), want %d", code, errOut, exitUsage)
		}
	})
}

func mustLoad(t *testing.T, kubeconfig string) *clientcmdapi.Config {
	t.Helper()
	cfg, err := clientcmd.Load([]byte(kubeconfig))
	if err != nil {
		t.Fatalf("%v:\n%s", err, kubeconfig)
	}
	return cfg
}
