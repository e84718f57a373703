package main

import (
	"testing"

	"github.com/podsapi/podsapi/internal/buildinfo"
	"github.com/podsapi/podsapi/server"
)

func TestVersion(t *testing.T) {
	old := buildinfo.Version
	buildinfo.Version = "v1.2.3-test"
	t.Cleanup(func() { buildinfo.Version = old })
	_, podsapi := startServer(t, server.Config{}, true) // not synced: health still answers
	kubelet := startKubelet(t).Path()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"Podsapi", []string{"version", "--socket", podsapi}, "Client Version: v1.2.3-test\nServer Version: v1.2.3-test\n"},
		{"Kubelet", []string{"version", "--socket", kubelet}, "Client Version: v1.2.3-test\nServer Version: unknown (the server sends no version: a kubelet, or an older podsapi)\n"},
		{"ClientOnly", []string{"version", "--client", "--socket", "/nonexistent/pods.sock"}, "Client Version: v1.2.3-test\n"},
		{"Flag", []string{"--version"}, "podsctl v1.2.3-test\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := run(t, tc.args...)
			if code != 0 || out != tc.want {
				t.Errorf("podsctl %q: exit %d, stdout\n%s\nwant\n%s\nstderr: %s", tc.args, code, out, tc.want, errOut)
			}
		})
	}
	t.Run("Unreachable", func(t *testing.T) {
		out, errOut, code := run(t, "version", "--socket", t.TempDir()+"/none.sock")
		if code != exitServer || out != "Client Version: v1.2.3-test\n" || errOut == "" {
			t.Errorf("exit %d, stdout %q, stderr %q: want exit 1 after the client's version, and an error", code, out, errOut)
		}
	})
}
