package kubeletgrpc_test

import (
	"fmt"
	"log/slog"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/source/kubeletgrpc"
	"github.com/podsapi/podsapi/test/sourcetest"
)

// manyPods returns n pods named p0, p1, ...
func manyPods(n int) []*corev1.Pod {
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		pods[i] = sourcetest.Pod("default", fmt.Sprintf("p%d", i), types.UID(fmt.Sprintf("uid-p%d", i)), corev1.PodRunning)
	}
	return pods
}

// TestSnapshotBounds: a snapshot over its bounds of pods or bytes (issue
// 25: endless ADDED without INITIAL_SYNC_COMPLETE grew RSS by 60 MiB/s) is
// abandoned and counted, the pods last known kept, and the last success not
// moved by it.
func TestSnapshotBounds(t *testing.T) {
	tests := []struct {
		name  string
		bound kubeletgrpc.Option
	}{
		{"pods", kubeletgrpc.WithSnapshotBounds(5, 0)},
		{"bytes", kubeletgrpc.WithSnapshotBounds(0, 2000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := sourcetest.NewFakeKubelet(t, socketPath(t), podA)
			h := start(t, k.Path(), tt.bound)
			n := len(h.rec.WaitPods(t, nil, podA.UID).Calls)
			synced, ok := sourcetest.MetricValue(t, h.reg, "podsapi_source_last_success_timestamp_seconds", map[string]string{"source": "kubelet-grpc"})
			if !ok {
				t.Fatal("no last success")
			}
			k.Stop()
			for _, p := range manyPods(20) {
				k.Set(p)
			}
			// Every attempt after the kubelet is back fails on the bound.
			before := h.logs.Count(slog.LevelDebug, "still unavailable")
			k.Start()
			h.logs.Wait(slog.LevelDebug, "still unavailable", before+2)
			if got := h.errors(t, "too_large"); got < 1 {
				t.Fatalf(`podsapi_source_errors_total{reason="too_large"} = %v, want at least 1`, got)
			}
			if s := h.rec.Snapshot(); len(s.Calls) != n || len(s.Pods) != 1 {
				t.Fatalf("sink calls from snapshots over the bound:\n%s", sourcetest.FormatCalls(since(s, n)))
			}
			if last, _ := sourcetest.MetricValue(t, h.reg, "podsapi_source_last_success_timestamp_seconds", map[string]string{"source": "kubelet-grpc"}); last != synced {
				t.Fatalf("the last success moved from %v to %v with snapshots abandoned", synced, last)
			}
		})
	}
}
