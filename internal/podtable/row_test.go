package podtable_test

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/internal/podtable"
)

// TestCells checks rows that the API server's printPod computes so,
// including its rules that podsctl's copy lacked (an errored container
// beside a completed one).
func TestCells(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	created := metav1.NewTime(now.Add(-90 * time.Minute))
	finished := metav1.NewTime(now.Add(-5 * time.Minute))
	base := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web-1", CreationTimestamp: created},
			Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "a"}, {Name: "b"}}},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning},
		}
	}
	for _, c := range []struct {
		name string
		pod  func() *corev1.Pod
		want []any
		done bool
	}{
		{"pending", base, []any{"web-1", "0/2", "Running", "0", "90m", "<none>", "node-1", "<none>", "<none>"}, false},
		{"completed beside an error", func() *corev1.Pod {
			p := base()
			p.Status.Phase = corev1.PodFailed
			p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.1"}}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{
				{Name: "a", RestartCount: 1, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error"}},
					LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: finished}}},
				{Name: "b", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}},
			}
			return p
		}, []any{"web-1", "0/2", "Error", "1 (5m ago)", "90m", "10.0.0.1", "node-1", "<none>", "<none>"}, true},
		{"readiness gates", func() *corev1.Pod {
			p := base()
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "x"}, {ConditionType: "y"}}
			p.Status.Conditions = []corev1.PodCondition{{Type: "x", Status: corev1.ConditionTrue}}
			p.Status.NominatedNodeName = "node-2"
			return p
		}, []any{"web-1", "0/2", "Running", "0", "90m", "<none>", "node-1", "node-2", "1/2"}, false},
		{"terminating", func() *corev1.Pod {
			p := base()
			p.DeletionTimestamp = &finished
			return p
		}, []any{"web-1", "0/2", "Terminating", "0", "90m", "<none>", "node-1", "<none>", "<none>"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := podtable.RowOf(c.pod())
			if got := r.Cells(now); !reflect.DeepEqual(got, c.want) {
				t.Errorf("cells %q, want %q", got, c.want)
			}
			if got := len(r.Conditions()) == 1; got != c.done {
				t.Errorf("Completed condition %v, want %v", got, c.done)
			}
			if n := len(podtable.Columns()); n != len(c.want) {
				t.Errorf("%d columns for %d cells", n, len(c.want))
			}
		})
	}
}
