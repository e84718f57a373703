package kubeletgrpc_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/source/kubeletgrpc"
	"github.com/podsapi/podsapi/test/sourcetest"
)

// TestEventBoundFollowsMaxPodBytes: an event whose pod is larger than the
// store takes (WithMaxPodBytes, --max-pod-bytes) plus EventSlack ends the
// stream before it is read whole, and is never handed to the store; the
// known pods are kept, and once the kubelet no longer has the pod the Source
// syncs again. By default the bound is the store's default, the API
// server's object limit (before: 256 MiB, the memory limit of the
// DaemonSet): a pod under it passes.
func TestEventBoundFollowsMaxPodBytes(t *testing.T) {
	const maxPod = 16 << 10
	big := sourcetest.Pod("default", "big", "uid-big", corev1.PodRunning)
	big.Annotations = map[string]string{"example.com/padding": strings.Repeat("x", maxPod+kubeletgrpc.EventSlack)}
	for _, tc := range []struct {
		name   string
		opts   []kubeletgrpc.Option
		accept bool
	}{
		{"bounded by max pod bytes", []kubeletgrpc.Option{kubeletgrpc.WithMaxPodBytes(maxPod)}, false},
		{"default bound", nil, true},
		{"any size", []kubeletgrpc.Option{kubeletgrpc.WithMaxPodBytes(-1)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := sourcetest.NewFakeKubelet(t, socketPath(t), podA)
			h := start(t, k.Path(), tc.opts...)
			h.rec.WaitPods(t, nil, podA.UID)
			k.Set(big)
			if tc.accept {
				h.rec.WaitPods(t, nil, podA.UID, big.UID)
				return
			}
			// The stream breaks at the oversized event, before the events
			// after it; the next stream's snapshot no longer has it.
			k.Remove(big)
			k.Set(podB)
			st := h.rec.WaitPods(t, nil, podA.UID, podB.UID)
			if n := h.errors(t, "stream"); n < 1 {
				t.Fatalf("podsapi_source_errors_total{reason=\"stream\"} = %v, want the oversized event's stream counted", n)
			}
			for _, c := range st.Calls {
				if c.UID == big.UID {
					t.Fatalf("the oversized pod reached the store: %v", c.Kind)
				}
			}
		})
	}
}
