package kubeletgrpc_test

import (
	"log/slog"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	"github.com/podsapi/podsapi/source/kubeletgrpc"
	"github.com/podsapi/podsapi/test/sourcetest"
)

var (
	podA = sourcetest.Pod("default", "a", "uid-a", corev1.PodRunning)
	podB = sourcetest.Pod("kube-system", "b", "uid-b", corev1.PodRunning)
	podC = sourcetest.Pod("default", "c", "uid-c", corev1.PodPending)
)

// withPhase returns a copy of pod in phase.
func withPhase(pod *corev1.Pod, phase corev1.PodPhase) *corev1.Pod {
	p := pod.DeepCopy()
	p.Status.Phase = phase
	return p
}

func TestName(t *testing.T) {
	tests := []struct {
		name string
		opts []kubeletgrpc.Option
		want string
	}{
		{name: "default", want: "kubelet-grpc:" + kubeletgrpc.DefaultSocket},
		{name: "path", opts: []kubeletgrpc.Option{kubeletgrpc.WithSocket("/run/k.sock")}, want: "kubelet-grpc:/run/k.sock"},
		{name: "unix URL", opts: []kubeletgrpc.Option{kubeletgrpc.WithSocket("unix:///run/k.sock")}, want: "kubelet-grpc:/run/k.sock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := kubeletgrpc.New(tt.opts...).Name(); got != tt.want {
				t.Errorf("Name() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRunRejectsEmptySocket(t *testing.T) {
	err := kubeletgrpc.New(kubeletgrpc.WithSocket("")).Run(t.Context(), sourcetest.NewRecorder())
	if err == nil {
		t.Fatal("Run with an empty socket path returned nil, want an error")
	}
}

func TestInitialSync(t *testing.T) {
	k := sourcetest.NewFakeKubelet(t, socketPath(t), podA, podB)
	k.HoldInitialSync()
	h := start(t, k.Path())
	k.WaitWatches(1)
	if s := h.rec.Snapshot(); len(s.Calls) != 0 {
		t.Fatalf("sink calls before INITIAL_SYNC_COMPLETE:\n%s", sourcetest.FormatCalls(s.Calls))
	}
	k.ReleaseInitialSync()
	s := h.rec.WaitPods(t, nil, podA.UID, podB.UID)
	got := make([]string, 0, len(s.Calls))
	for _, c := range s.Calls {
		got = append(got, c.String())
	}
	want := []string{"upsert default/a uid-a", "upsert kube-system/b uid-b", "synced"}
	if !slices.Equal(got, want) {
		t.Errorf("sink calls = %q, want %q", got, want)
	}
	if p := s.Pods[podA.UID]; p.Spec.Containers[0].Image != podA.Spec.Containers[0].Image || p.Labels["app"] != "a" {
		t.Errorf("pod a decoded as %+v", p)
	}
	if v, ok := sourcetest.MetricValue(t, h.reg, "podsapi_source_last_success_timestamp_seconds",
		map[string]string{"source": "kubelet-grpc"}); !ok || v <= 0 {
		t.Errorf("podsapi_source_last_success_timestamp_seconds = %v (exported %v), want > 0", v, ok)
	}
}

func TestLiveEvents(t *testing.T) {
	tests := []struct {
		name   string
		change func(k *sourcetest.FakeKubelet)
		want   []string // Sink calls after the initial sync.
		pods   []*corev1.Pod
	}{
		{
			name:   "added",
			change: func(k *sourcetest.FakeKubelet) { k.Set(podC) },
			want:   []string{"upsert default/c uid-c"},
			pods:   []*corev1.Pod{podA, podB, podC},
		},
		{
			name:   "modified",
			change: func(k *sourcetest.FakeKubelet) { k.Set(withPhase(podA, corev1.PodFailed)) },
			want:   []string{"upsert default/a uid-a"},
			pods:   []*corev1.Pod{withPhase(podA, corev1.PodFailed), podB},
		},
		{
			name:   "deleted by UID from a stub",
			change: func(k *sourcetest.FakeKubelet) { k.Remove(podB) },
			want:   []string{"delete uid-b"},
			pods:   []*corev1.Pod{podA},
		},
		{
			name: "identical version is not sent again",
			change: func(k *sourcetest.FakeKubelet) {
				k.Set(podA)
				k.Set(podC)
			},
			want: []string{"upsert default/c uid-c"},
			pods: []*corev1.Pod{podA, podB, podC},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := sourcetest.NewFakeKubelet(t, socketPath(t), podA, podB)
			h := start(t, k.Path())
			n := len(h.rec.WaitPods(t, nil, podA.UID, podB.UID).Calls)
			tt.change(k)
			s := h.rec.Wait(t, "the changes", func(s sourcetest.State) bool { return len(s.Calls) >= n+len(tt.want) })
			var got []string
			for _, c := range since(s, n) {
				got = append(got, c.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("sink calls = %q, want %q", got, tt.want)
			}
			for _, p := range tt.pods {
				if got := s.Pods[p.UID]; got == nil || got.Status.Phase != p.Status.Phase {
					t.Errorf("sink pod %s = %v, want phase %s", p.UID, got, p.Status.Phase)
				}
			}
			if len(s.Pods) != len(tt.pods) {
				t.Errorf("sink has %d pods, want %d", len(s.Pods), len(tt.pods))
			}
		})
	}
}

// withVersion returns a copy of pod at resourceVersion rv, in phase.
func withVersion(pod *corev1.Pod, rv string, phase corev1.PodPhase) *corev1.Pod {
	p := withPhase(pod, phase)
	p.ResourceVersion = rv
	return p
}

// TestOlderEvents sends, after a pod's version, an event of another
// version of it, as a kubelet's status manager does with the pod it was
// given when its pod manager already holds a newer one.
func TestOlderEvents(t *testing.T) {
	tests := []struct {
		name      string
		have, ev  *corev1.Pod
		want      []string // Sink calls after the initial sync, before c's.
		wantPhase corev1.PodPhase
	}{
		{
			name:      "lower resourceVersion ignored",
			have:      withVersion(podA, "42", corev1.PodRunning),
			ev:        withVersion(podA, "41", corev1.PodPending),
			wantPhase: corev1.PodRunning,
		},
		{
			name:      "higher resourceVersion applied",
			have:      withVersion(podA, "42", corev1.PodRunning),
			ev:        withVersion(podA, "43", corev1.PodSucceeded),
			want:      []string{"upsert default/a uid-a"},
			wantPhase: corev1.PodSucceeded,
		},
		{
			name:      "same resourceVersion, another status, applied",
			have:      withVersion(podA, "42", corev1.PodRunning),
			ev:        withVersion(podA, "42", corev1.PodFailed),
			want:      []string{"upsert default/a uid-a"},
			wantPhase: corev1.PodFailed,
		},
		{
			name:      "static pod without resourceVersion applied",
			have:      withVersion(podA, "", corev1.PodRunning),
			ev:        withVersion(podA, "", corev1.PodPending),
			want:      []string{"upsert default/a uid-a"},
			wantPhase: corev1.PodPending,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := sourcetest.NewFakeKubelet(t, socketPath(t), tt.have)
			h := start(t, k.Path())
			n := len(h.rec.WaitPods(t, nil, podA.UID).Calls)
			raw, err := tt.ev.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			k.SendRaw(&v1alpha1.WatchPodsEvent{Type: v1alpha1.EventType_MODIFIED, Pod: raw})
			k.Set(podC)
			s := h.rec.WaitPods(t, nil, podA.UID, podC.UID)
			var got []string
			for _, c := range since(s, n) {
				got = append(got, c.String())
			}
			if want := append(slices.Clone(tt.want), "upsert default/c uid-c"); !slices.Equal(got, want) {
				t.Errorf("sink calls = %q, want %q", got, want)
			}
			if got := s.Pods[podA.UID].Status.Phase; got != tt.wantPhase {
				t.Errorf("sink pod a in phase %s, want %s", got, tt.wantPhase)
			}
		})
	}
}

func TestReconnectReconciles(t *testing.T) {
	tests := []struct {
		name    string
		outage  func(k *sourcetest.FakeKubelet, during func())
		restart bool
	}{
		{
			name: "kubelet restart",
			outage: func(k *sourcetest.FakeKubelet, during func()) {
				k.Stop()
				during()
				k.Start()
			},
		},
		{
			name: "stream dropped",
			outage: func(k *sourcetest.FakeKubelet, during func()) {
				k.HoldInitialSync()
				k.DropStreams()
				k.WaitWatches(2) // The Source watches again; its snapshot is held.
				during()
				k.ReleaseInitialSync()
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := sourcetest.NewFakeKubelet(t, socketPath(t), podA, podB, podC)
			h := start(t, k.Path())
			n := len(h.rec.WaitPods(t, nil, podA.UID, podB.UID, podC.UID).Calls)
			podD := sourcetest.Pod("default", "d", "uid-d", corev1.PodRunning)
			tt.outage(k, func() {
				k.Remove(podB)
				k.Set(withPhase(podA, corev1.PodSucceeded))
				k.Set(podD)
			})
			s := h.rec.WaitPods(t, inPhase(map[string]corev1.PodPhase{"a": corev1.PodSucceeded}), podA.UID, podC.UID, podD.UID)
			var got []string
			for _, c := range since(s, n) {
				got = append(got, c.String())
			}
			want := []string{"delete uid-b", "upsert default/a uid-a", "upsert default/d uid-d"}
			if !slices.Equal(got, want) {
				t.Errorf("sink calls after the outage = %q, want %q (deletes first, no duplicates, unchanged pods not resent)", got, want)
			}
			h.logs.Wait(slog.LevelInfo, "available again", 1)
			if got := h.logs.Count(slog.LevelWarn, "unavailable"); got != 1 {
				t.Errorf("outage logged %d times at warning level, want once", got)
			}
			if got := h.errors(t, "stream") + h.errors(t, "connect"); got < 1 {
				t.Errorf("errors counted = %v, want at least 1", got)
			}

			// Live events flow again.
			k.Set(withPhase(podC, corev1.PodRunning))
			h.rec.WaitPods(t, inPhase(map[string]corev1.PodPhase{"c": corev1.PodRunning}), podA.UID, podC.UID, podD.UID)
		})
	}
}

func TestOutageKeepsPodsAndLogsOnce(t *testing.T) {
	k := sourcetest.NewFakeKubelet(t, socketPath(t), podA)
	h := start(t, k.Path())
	n := len(h.rec.WaitPods(t, nil, podA.UID).Calls)
	k.Stop()
	h.logs.Wait(slog.LevelDebug, "still unavailable", 3) // At least four failed attempts.
	if got := h.logs.Count(slog.LevelWarn, "unavailable"); got != 1 {
		t.Errorf("outage logged %d times at warning level, want once", got)
	}
	if got := h.errors(t, "connect"); got < 3 {
		t.Errorf(`podsapi_source_errors_total{reason="connect"} = %v, want at least 3`, got)
	}
	if s := h.rec.Snapshot(); len(s.Calls) != n || len(s.Pods) != 1 {
		t.Errorf("sink calls during the outage:\n%s", sourcetest.FormatCalls(since(s, n)))
	}
	k.Start()
	h.logs.Wait(slog.LevelInfo, "available again", 1)
	if s := h.rec.Snapshot(); len(s.Calls) != n {
		t.Errorf("sink calls after an outage without changes:\n%s", sourcetest.FormatCalls(since(s, n)))
	}
	if got := h.logs.Count(slog.LevelInfo, "available again"); got != 1 {
		t.Errorf("recovery logged %d times, want once", got)
	}
}

func TestWaitsForKubeletBeforeSync(t *testing.T) {
	path := socketPath(t)
	h := start(t, path)
	h.logs.Wait(slog.LevelWarn, "not synced yet", 1)
	if s := h.rec.Snapshot(); len(s.Calls) != 0 {
		t.Fatalf("sink calls without a kubelet:\n%s", sourcetest.FormatCalls(s.Calls))
	}
	sourcetest.NewFakeKubelet(t, path, podA)
	h.rec.WaitPods(t, nil, podA.UID)
}

func TestUnexpectedEvents(t *testing.T) {
	tests := []struct {
		name   string
		event  *v1alpha1.WatchPodsEvent
		reason string
	}{
		{name: "undecodable pod", event: &v1alpha1.WatchPodsEvent{Type: v1alpha1.EventType_ADDED, Pod: []byte{0xff, 0xff, 0xff}}, reason: "decode"},
		{name: "pod without UID", event: &v1alpha1.WatchPodsEvent{Type: v1alpha1.EventType_MODIFIED, Pod: mustMarshal(t, sourcetest.Pod("default", "x", "", corev1.PodRunning))}, reason: "protocol"},
		{name: "unspecified type", event: &v1alpha1.WatchPodsEvent{}, reason: "protocol"},
		{name: "unknown type", event: &v1alpha1.WatchPodsEvent{Type: 42}, reason: "protocol"},
		{name: "second initial sync", event: &v1alpha1.WatchPodsEvent{Type: v1alpha1.EventType_INITIAL_SYNC_COMPLETE}, reason: "protocol"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := sourcetest.NewFakeKubelet(t, socketPath(t), podA)
			h := start(t, k.Path())
			n := len(h.rec.WaitPods(t, nil, podA.UID).Calls)
			k.SendRaw(tt.event)
			k.Set(podB)
			s := h.rec.WaitPods(t, nil, podA.UID, podB.UID)
			if got := since(s, n); len(got) != 1 {
				t.Errorf("sink calls = \n%s\nwant only the upsert of b", sourcetest.FormatCalls(got))
			}
			if got := h.errors(t, tt.reason); got != 1 {
				t.Errorf("podsapi_source_errors_total{reason=%q} = %v, want 1", tt.reason, got)
			}
			if got := h.logs.Count(slog.LevelWarn, "unavailable"); got != 0 {
				t.Errorf("a bad event was taken as an outage")
			}
		})
	}
}

func mustMarshal(t *testing.T, pod *corev1.Pod) []byte {
	t.Helper()
	raw, err := pod.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
