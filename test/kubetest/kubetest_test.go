package kubetest_test

import (
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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

// TestAPIServerPutEtcd checks that objects written straight into etcd, in
// more than one transaction, are served by the API server as its own:
// listed, got as written, and changed through it.
func TestAPIServerPutEtcd(t *testing.T) {
	cp := kubetest.Start(t)
	ctx := t.Context()
	const n = 300 // Three transactions.
	var kvs [][2][]byte
	for i := range n {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%03d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i)),
				CreationTimestamp: metav1.Now(), Labels: map[string]string{"i": strconv.Itoa(i)}},
			Data: map[string]string{"k": "v"},
		}
		kvs = append(kvs, [2][]byte{[]byte("/registry/configmaps/default/" + cm.Name), kubetest.StoredValue(t, cm, corev1.SchemeGroupVersion)})
	}
	cp.PutEtcd(t, kvs)
	kubetest.Eventually(t, "the API server lists the ConfigMaps", func() error {
		list, err := cp.Admin.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{LabelSelector: "i"})
		if err != nil {
			return err
		}
		if len(list.Items) != n {
			return fmt.Errorf("%d of %d", len(list.Items), n)
		}
		return nil
	})
	got, err := cp.Admin.CoreV1().ConfigMaps("default").Get(ctx, "cm-299", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != "00000000-0000-4000-8000-000000000299" || got.Labels["i"] != "299" || got.Data["k"] != "v" || got.ResourceVersion == "" {
		t.Fatalf("got %+v, want the object written", got)
	}
	patched, err := cp.Admin.CoreV1().ConfigMaps("default").Patch(ctx, "cm-299", types.MergePatchType, []byte(`{"data":{"k":"w"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if patched.Data["k"] != "w" || patched.ResourceVersion == got.ResourceVersion {
		t.Fatalf("patched %+v", patched)
	}
}
