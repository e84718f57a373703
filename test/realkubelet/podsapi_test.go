package realkubelet_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/podsapi/podsapi/conformance"
	"github.com/podsapi/podsapi/test/childproc"
	"github.com/podsapi/podsapi/test/realkubelet"
)

// TestPodsapiOverKubelet runs podsapi-server on a real kubelet, through
// each kubelet source, and judges it with the typed wire's suite
// (conformance/features/podsapi-over-kubelet.yaml): the kubelet's static
// pod directory is the driver, and the watch cases edit annotations and
// arguments, which the kubelet's own watch never reports. The lifecycle
// cases are not run: they would restart podsapi, whose readiness is the
// kubelet's.
func TestPodsapiOverKubelet(t *testing.T) {
	k := start(t, realkubelet.Options{})
	server := buildServer(t)
	f, err := conformance.LoadFeatures(filepath.Join(repoRoot, "conformance/features/podsapi-over-kubelet.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		source string
		flags  []string
		// known is the known-failing file of the source, relative to the
		// repository; none when empty.
		known string
	}{
		{"kubelet-grpc", []string{"--source-socket", k.Socket, "--source-resync-interval", "1s"},
			"conformance/features/podsapi-over-kubelet-grpc.known-failing"},
		{"kubelet-http", []string{"--kubelet-url", k.ReadOnlyURL + "/pods", "--kubelet-poll-interval", "1s"}, ""},
	} {
		t.Run(tc.source, func(t *testing.T) {
			socket := filepath.Join(k.Dir, "podsapi-"+tc.source+".sock")
			metrics := freeAddress(t)
			runServer(t, server, append([]string{"--source", tc.source, "--socket", socket, "--metrics-address", metrics,
				"--watch-queue", "16", "--log-level", "warn"}, tc.flags...)...)
			cfg := conformance.Config{
				Endpoint:    "unix://" + socket,
				Wire:        conformance.WirePodsAPI,
				ManifestDir: k.ManifestDir,
				MetricsURL:  "http://" + metrics + "/metrics",
				Features:    f.WithNodeName(k.NodeName),
				// A change goes through the kubelet (about a second) and the
				// source (a resync or a poll, a second).
				CaseTimeout:  3 * time.Minute,
				StartTimeout: time.Minute,
				RerunCommand: "CONFORMANCE_RUN=... make conformance-kubelet",
				Log:          os.Stderr,
				Verbose:      testing.Verbose(),
			}
			if tc.known != "" {
				cfg.KnownFailing, cfg.KnownIntermittent, err = conformance.ReadKnownFailing(filepath.Join(repoRoot, tc.known))
				if err != nil {
					t.Fatal(err)
				}
			}
			if r := os.Getenv("CONFORMANCE_RUN"); r != "" {
				cfg.Run = regexp.MustCompile(r)
			}
			conformance.Run(t, cfg)
		})
	}
}

// buildServer builds podsapi-server into a temporary directory.
func buildServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "podsapi-server")
	if err := childproc.Build(t.Context(), "", bin, "github.com/podsapi/podsapi/cmd/podsapi-server"); err != nil {
		t.Fatal(err)
	}
	return bin
}

// runServer runs podsapi-server with args until the end of the test,
// stopped by its PID (SIGTERM, then SIGKILL after 20 s).
func runServer(t *testing.T, bin string, args ...string) {
	t.Helper()
	runServerPID(t, bin, args...)
}

// runServerPID is runServer, returning the server's PID.
func runServerPID(t *testing.T, bin string, args ...string) int {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("podsapi-server did not stop within 20 s of SIGTERM")
		}
	})
	return cmd.Process.Pid
}

// freeAddress returns a loopback address whose port was free a moment
// ago.
func freeAddress(t *testing.T) string {
	t.Helper()
	var lc net.ListenConfig
	l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
