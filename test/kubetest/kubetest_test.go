package kubetest_test

import (
	"errors"
	"syscall"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/test/kubetest"
)

// TestAPIServerControlPlane checks the harness itself: the API server
// answers, stops by its PID, starts again on its port, and etcd compacts.
func TestAPIServerControlPlane(t *testing.T) {
	cp := kubetest.Start(t)
	if _, err := cp.Admin.CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	pid := cp.APIServerPID()
	took := cp.StopAPIServer(t)
	t.Logf("the API server stopped in %v", took)
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill -0 %d after the stop: %v, want ESRCH", pid, err)
	}
	cp.StartAPIServer(t)
	if cp.APIServerPID() == pid {
		t.Errorf("the restarted API server has the PID of the stopped one")
	}
	if _, err := cp.Admin.CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if rev := cp.CompactEtcd(t); rev <= 1 {
		t.Errorf("compacted at revision %d, want the revision of a store that holds objects", rev)
	}
}
