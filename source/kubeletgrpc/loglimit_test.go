package kubeletgrpc_test

import (
	"log/slog"
	"testing"
	"time"

	"k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	"github.com/podsapi/podsapi/source/internal/sourcelog"
	"github.com/podsapi/podsapi/source/kubeletgrpc"
	"github.com/podsapi/podsapi/test/sourcetest"
)

// TestRepeatedProtocolErrorsLogged: an upstream repeating the same fault
// (issue 25: 77,711 lines in about 1 s) has every event counted, and at most
// one warning per reason written every sourcelog.Interval.
func TestRepeatedProtocolErrorsLogged(t *testing.T) {
	const n = 2000
	k := sourcetest.NewFakeKubelet(t, socketPath(t), podA)
	// No resync: podB must come by the watch, after every fault, or a
	// resync (every 10 s by default, a run's length on a busy machine)
	// could bring it before the faults are all counted.
	h := start(t, k.Path(), kubeletgrpc.WithResyncInterval(-1))
	h.rec.WaitPods(t, nil, podA.UID)
	began := time.Now()
	for i := range n {
		ev := &v1alpha1.WatchPodsEvent{Type: 42}
		if i%2 == 1 {
			ev = &v1alpha1.WatchPodsEvent{Type: v1alpha1.EventType_ADDED, Pod: []byte{0xff, 0xff, 0xff}}
		}
		k.SendRaw(ev)
	}
	k.Set(podB)
	h.rec.WaitPods(t, nil, podA.UID, podB.UID)
	// Lines allowed per reason: one, and one more per interval elapsed.
	allowed := 1 + int(time.Since(began)/sourcelog.Interval)
	for reason, msg := range map[string]string{"protocol": "an event of unknown type", "decode": "cannot decode a pod"} {
		if got := h.errors(t, reason); got != n/2 {
			t.Errorf("podsapi_source_errors_total{reason=%q} = %v, want %d: every fault counted", reason, got, n/2)
		}
		if got := h.logs.Count(slog.LevelWarn, msg); got < 1 || got > allowed {
			t.Errorf("%d warnings %q for %d faults, want 1 to %d", got, msg, n/2, allowed)
		}
	}
}
