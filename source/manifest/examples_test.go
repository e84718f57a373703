package manifest_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestExamples loads examples/manifests, the data of `make run`, strictly.
func TestExamples(t *testing.T) {
	t.Parallel()
	h := start(t, "../../examples/manifests")
	h.checkErrors(nil)
	want := []string{
		"batch/nightly-report-29031840-7xk2p",
		"kube-system/kube-proxy-node-1",
		"kube-system/node-problem-detector-node-1",
		"monitoring/node-exporter",
		"shop/cache-0",
		"shop/orders-api",
		"shop/web-7d9f8b6c5d-x2k4q",
	}
	if got := h.names(); !slices.Equal(got, want) {
		t.Fatalf("served %q, want %q", got, want)
	}
	tests := []struct {
		name      string
		namespace string
		pod       string
		check     func(t *testing.T, p *corev1.Pod)
	}{
		{
			name: "running web pod with sidecar and init container", namespace: "shop", pod: "web-7d9f8b6c5d-x2k4q",
			check: func(t *testing.T, p *corev1.Pod) {
				if p.UID != "00000000-0000-4000-8000-00000000a001" || p.Status.Phase != corev1.PodRunning {
					t.Errorf("uid %q, phase %q", p.UID, p.Status.Phase)
				}
				if len(p.Spec.Containers) != 2 || len(p.Spec.InitContainers) != 1 || len(p.Status.ContainerStatuses) != 2 {
					t.Errorf("%d containers, %d init containers, %d container statuses; want 2, 1, 2",
						len(p.Spec.Containers), len(p.Spec.InitContainers), len(p.Status.ContainerStatuses))
				}
				if p.Status.PodIP != "10.244.1.17" || len(p.Status.PodIPs) != 2 {
					t.Errorf("podIP %q, podIPs %v", p.Status.PodIP, p.Status.PodIPs)
				}
				if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].Kind != "ReplicaSet" {
					t.Errorf("ownerReferences %v, want one ReplicaSet", p.OwnerReferences)
				}
				if got := p.Spec.Containers[0].Resources.Limits.Memory().String(); got != "128Mi" {
					t.Errorf("nginx memory limit %s, want 128Mi", got)
				}
			},
		},
		{
			name: "pending pod with derived UID", namespace: "shop", pod: "cache-0",
			check: func(t *testing.T, p *corev1.Pod) {
				if p.UID != uidOf("shop", "cache-0") || p.Status.Phase != corev1.PodPending {
					t.Errorf("uid %q, phase %q", p.UID, p.Status.Phase)
				}
			},
		},
		{
			name: "failed job pod", namespace: "batch", pod: "nightly-report-29031840-7xk2p",
			check: func(t *testing.T, p *corev1.Pod) {
				term := p.Status.ContainerStatuses[0].State.Terminated
				if p.Status.Phase != corev1.PodFailed || term == nil || term.ExitCode != 1 || term.Reason != "Error" {
					t.Errorf("phase %q, terminated %v", p.Status.Phase, term)
				}
			},
		},
		{
			name: "crash looping pod", namespace: "shop", pod: "orders-api",
			check: func(t *testing.T, p *corev1.Pod) {
				cs := p.Status.ContainerStatuses[0]
				if cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" || cs.RestartCount != 7 {
					t.Errorf("state %v, restartCount %d", cs.State, cs.RestartCount)
				}
			},
		},
		{
			name: "pod without status defaults to Pending", namespace: "kube-system", pod: "node-problem-detector-node-1",
			check: func(t *testing.T, p *corev1.Pod) {
				if p.Status.Phase != corev1.PodPending || p.Spec.NodeName != testNode {
					t.Errorf("phase %q, nodeName %q", p.Status.Phase, p.Spec.NodeName)
				}
			},
		},
		{
			name: "JSON pod", namespace: "monitoring", pod: "node-exporter",
			check: func(t *testing.T, p *corev1.Pod) {
				if p.UID != "00000000-0000-4000-8000-00000000d001" || !p.Spec.HostNetwork {
					t.Errorf("uid %q, hostNetwork %v", p.UID, p.Spec.HostNetwork)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, h.pod(tt.namespace, tt.pod))
		})
	}
}
