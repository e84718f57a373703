package realkubelet_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/podsapi/podsapi/test/realkubelet"
)

// repoRoot is the root of the repository, from this package's directory.
const repoRoot = "../.."

// start starts a real kubelet, or skips the test when PODSAPI_KUBE_BIN is
// not set (make conformance-kubelet sets it). It is stopped and its
// directory removed at the end of the test; on failure the end of its log
// is printed.
func start(t *testing.T, opts realkubelet.Options) *realkubelet.Kubelet {
	t.Helper()
	bin := os.Getenv(realkubelet.BinEnv)
	if bin == "" {
		t.Skipf("%s is not set: make conformance-kubelet builds a real kubelet and runs these tests", realkubelet.BinEnv)
	}
	opts.BinDir = bin
	k, err := realkubelet.Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the end of the kubelet's log:\n%s", k.LogTail(8<<10))
		}
		if err := k.Close(); err != nil {
			t.Errorf("stop the kubelet: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := k.WaitSocket(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	return k
}
