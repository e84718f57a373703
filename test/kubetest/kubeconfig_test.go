package kubetest_test

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/podsapi/podsapi/test/kubetest"
)

// TestWriteKubeconfig writes a kubeconfig of two servers and reads it back
// as a client does (clientcmd, each context in turn): each context reaches
// its server, verified by its CA, with the user's token; the first is
// current; the file is the user's alone.
func TestWriteKubeconfig(t *testing.T) {
	dir := t.TempDir()
	// Each server's CA, as clientcmd reads it.
	ca := func(name string) string {
		d := filepath.Join(dir, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		_, _, _ = kubetest.ServingCert(t, d)
		return filepath.Join(d, "serving-ca.crt")
	}
	servers := []kubetest.Server{
		{Name: "direct", Host: "127.0.0.1:6443", CAFile: ca("direct")},
		{Name: "podsapi", Host: "[::1]:10250", CAFile: ca("podsapi")},
	}
	path := kubetest.WriteKubeconfig(t, filepath.Join(dir, "kubeconfig"), "agent", "secret-token", servers...)

	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := st.Mode().Perm(); mode != 0o600 {
		t.Errorf("mode %v, want 0600", mode)
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CurrentContext != "direct" {
		t.Errorf("current context %q, want direct", cfg.CurrentContext)
	}
	for _, s := range servers {
		t.Run(s.Name, func(t *testing.T) {
			rc, err := clientcmd.NewNonInteractiveClientConfig(*cfg, s.Name, nil, nil).ClientConfig()
			if err != nil {
				t.Fatal(err)
			}
			if rc.Host != "https://"+s.Host || rc.CAFile != s.CAFile || rc.BearerToken != "secret-token" {
				t.Errorf("host %q, CA file %q, token %q; want https://%s, %s, secret-token", rc.Host, rc.CAFile, rc.BearerToken, s.Host, s.CAFile)
			}
		})
	}
}
