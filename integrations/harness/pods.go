package harness

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/podsapi/podsapi/test/kubetest"
)

// Pod returns a pod of namespace ns bound to node (the API server has no
// scheduler), with one container "main"; a test changes it before
// CreatePod as it needs.
func Pod(ns, name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers:                    []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
}

// CreatePod creates the pod (and its namespace if needed) through the API
// server and returns it as the API server stored it.
func (c *Cluster) CreatePod(t testing.TB, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	c.Namespace(t, pod.Namespace)
	got, err := c.Admin.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// DeletePod deletes the pod at once (grace period 0: no kubelet confirms).
func (c *Cluster) DeletePod(t testing.TB, ns, name string) {
	t.Helper()
	if err := c.Admin.CoreV1().Pods(ns).Delete(context.Background(), name,
		metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
}

// UpdatePod applies change to the pod's current version and writes it
// through the API server, retrying on a conflict; it returns the result.
func (c *Cluster) UpdatePod(t testing.TB, ns, name string, change func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	var out *corev1.Pod
	kubetest.Eventually(t, "update of pod "+ns+"/"+name, func() error {
		p, err := c.Admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(p)
		out, err = c.Admin.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{})
		return err
	})
	return out
}
