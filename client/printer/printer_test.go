package printer_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/client"
	"github.com/podsapi/podsapi/client/printer"
	"github.com/podsapi/podsapi/fieldmask"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
)

var now = time.Date(2026, 11, 4, 16, 0, 0, 0, time.UTC)

// pod returns a pod created an hour ago with the given container statuses.
func pod(phase corev1.PodPhase, statuses ...corev1.ContainerStatus) *corev1.Pod {
	p := &corev1.Pod{}
	p.Name = "p"
	p.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
	p.Status.Phase = phase
	for _, s := range statuses {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: s.Name})
	}
	p.Status.ContainerStatuses = statuses
	return p
}

func running(name string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
}

func waiting(reason string, restarts int32, lastExit time.Time) corev1.ContainerStatus {
	s := corev1.ContainerStatus{Name: "w", RestartCount: restarts, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
	if !lastExit.IsZero() {
		s.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(lastExit)}
	}
	return s
}

func terminated(reason string, code, signal int32) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: "t", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code, Signal: signal}}}
}

func TestSummarize(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	tests := []struct {
		name string
		pod  func() *corev1.Pod
		want printer.Summary
	}{
		{"Running", func() *corev1.Pod { return pod(corev1.PodRunning, running("a"), running("b")) },
			printer.Summary{Ready: "2/2", Status: "Running", Restarts: "0", Age: "60m"}},
		{"CrashLoopBackOff", func() *corev1.Pod {
			return pod(corev1.PodRunning, running("a"), waiting("CrashLoopBackOff", 4, now.Add(-90*time.Second)))
		}, printer.Summary{Ready: "1/2", Status: "CrashLoopBackOff", Restarts: "4 (90s ago)", Age: "60m"}},
		{"Completed", func() *corev1.Pod { return pod(corev1.PodSucceeded, terminated("Completed", 0, 0)) },
			printer.Summary{Ready: "0/1", Status: "Completed", Restarts: "0", Age: "60m"}},
		{"Error", func() *corev1.Pod { return pod(corev1.PodFailed, terminated("Error", 1, 0)) },
			printer.Summary{Ready: "0/1", Status: "Error", Restarts: "0", Age: "60m"}},
		{"ExitCode", func() *corev1.Pod { return pod(corev1.PodFailed, terminated("", 3, 0)) },
			printer.Summary{Ready: "0/1", Status: "ExitCode:3", Restarts: "0", Age: "60m"}},
		{"Signal", func() *corev1.Pod { return pod(corev1.PodFailed, terminated("", 137, 9)) },
			printer.Summary{Ready: "0/1", Status: "Signal:9", Restarts: "0", Age: "60m"}},
		{"CompletedWithRunningSidecar", func() *corev1.Pod {
			p := pod(corev1.PodRunning, terminated("Completed", 0, 0), running("b"))
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
			return p
		}, printer.Summary{Ready: "1/2", Status: "NotReady", Restarts: "0", Age: "60m"}},
		{"InitRunning", func() *corev1.Pod {
			p := pod(corev1.PodPending, waiting("PodInitializing", 0, time.Time{}))
			p.Spec.InitContainers = []corev1.Container{{Name: "i1"}, {Name: "i2"}}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{terminated("Completed", 0, 0), {Name: "i2", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
			return p
		}, printer.Summary{Ready: "0/1", Status: "Init:1/2", Restarts: "0", Age: "60m"}},
		{"InitCrashLoop", func() *corev1.Pod {
			p := pod(corev1.PodPending, waiting("PodInitializing", 0, time.Time{}))
			p.Spec.InitContainers = []corev1.Container{{Name: "i1"}}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{waiting("CrashLoopBackOff", 2, time.Time{})}
			return p
		}, printer.Summary{Ready: "0/1", Status: "Init:CrashLoopBackOff", Restarts: "2", Age: "60m"}},
		{"InitError", func() *corev1.Pod {
			p := pod(corev1.PodPending, waiting("PodInitializing", 0, time.Time{}))
			p.Spec.InitContainers = []corev1.Container{{Name: "i1"}}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{terminated("", 2, 0)}
			return p
		}, printer.Summary{Ready: "0/1", Status: "Init:ExitCode:2", Restarts: "0", Age: "60m"}},
		{"SidecarCounts", func() *corev1.Pod {
			p := pod(corev1.PodRunning, running("a"))
			p.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: &always}}
			s := running("proxy")
			s.Started = new(true)
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{s}
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}}
			return p
		}, printer.Summary{Ready: "2/2", Status: "Running", Restarts: "0", Age: "60m"}},
		{"Terminating", func() *corev1.Pod {
			p := pod(corev1.PodRunning, running("a"))
			p.DeletionTimestamp = &metav1.Time{Time: now}
			return p
		}, printer.Summary{Ready: "1/1", Status: "Terminating", Restarts: "0", Age: "60m"}},
		{"DeletedAfterSuccess", func() *corev1.Pod {
			p := pod(corev1.PodSucceeded, terminated("Completed", 0, 0))
			p.DeletionTimestamp = &metav1.Time{Time: now}
			return p
		}, printer.Summary{Ready: "0/1", Status: "Completed", Restarts: "0", Age: "60m"}},
		{"NodeLost", func() *corev1.Pod {
			p := pod(corev1.PodRunning, running("a"))
			p.Status.Reason = "NodeLost"
			p.DeletionTimestamp = &metav1.Time{Time: now}
			return p
		}, printer.Summary{Ready: "1/1", Status: "Unknown", Restarts: "0", Age: "60m"}},
		{"Evicted", func() *corev1.Pod {
			p := pod(corev1.PodFailed)
			p.Status.Reason = "Evicted"
			return p
		}, printer.Summary{Ready: "0/0", Status: "Evicted", Restarts: "0", Age: "60m"}},
		{"SchedulingGated", func() *corev1.Pod {
			p := pod(corev1.PodPending)
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Reason: corev1.PodReasonSchedulingGated}}
			return p
		}, printer.Summary{Ready: "0/0", Status: "SchedulingGated", Restarts: "0", Age: "60m"}},
		{"NoCreationTime", func() *corev1.Pod {
			p := pod(corev1.PodPending)
			p.CreationTimestamp = metav1.Time{}
			return p
		}, printer.Summary{Ready: "0/0", Status: "Pending", Restarts: "0", Age: "<unknown>"}},
		{"StaticPodOfAStandaloneKubelet", func() *corev1.Pod {
			p := pod(corev1.PodRunning)
			p.CreationTimestamp = metav1.Time{}
			started := metav1.NewTime(now.Add(-5 * time.Minute))
			p.Status.StartTime = &started
			return p
		}, printer.Summary{Ready: "0/0", Status: "Running", Restarts: "0", Age: "5m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := printer.Summarize(tt.pod(), now); got != tt.want {
				t.Fatalf("Summarize = %+v, want %+v", got, tt.want)
			}
			// The fields the table asks for are all it needs.
			for _, f := range []printer.Format{printer.Table, printer.Wide} {
				masked := project(t, tt.pod(), printer.Fields(f))
				if got := printer.Summarize(masked, now); got != tt.want {
					t.Errorf("Summarize of the pod masked to Fields(%s) = %+v, want %+v", f, got, tt.want)
				}
			}
		})
	}
}

func TestParseFormat(t *testing.T) {
	tests := []struct {
		in      string
		want    printer.Format
		wantErr bool
	}{
		{"", printer.Table, false},
		{"table", printer.Table, false},
		{"wide", printer.Wide, false},
		{"json", printer.JSON, false},
		{"yaml", printer.YAML, false},
		{"name", printer.Name, false},
		{"xml", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := printer.ParseFormat(tt.in)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Fatalf("ParseFormat(%q) = %q, %v", tt.in, got, err)
			}
		})
	}
}

// TestEventWrites checks that each event is one Write, and that the table's
// snapshot is held until SYNCED.
func TestEventWrites(t *testing.T) {
	var buf bytes.Buffer
	p := printer.New(&buf, printer.Table, printer.WithNow(func() time.Time { return now }))
	a := pod(corev1.PodRunning, running("a"))
	if err := p.PrintEvent(client.Event{Type: client.Added, Pod: a}); err != nil || buf.Len() != 0 {
		t.Fatalf("snapshot row printed before SYNCED: %q, %v", buf.String(), err)
	}
	if err := p.PrintEvent(client.Event{Type: client.Synced}); err != nil {
		t.Fatal(err)
	}
	want := "EVENT      NAMESPACE   NAME   READY   STATUS    RESTARTS   AGE\n" +
		"ADDED                  p      1/1     Running   0          60m\n" +
		"SYNCED\n"
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

// project returns pod masked to paths, as a server sends it.
func project(t *testing.T, pod *corev1.Pod, paths []string) *corev1.Pod {
	t.Helper()
	m, err := fieldmask.Parse(paths...)
	if err != nil {
		t.Fatalf("fieldmask.Parse(%q): %v", paths, err)
	}
	raw, err := pod.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.AppendProjection(nil, raw)
	if err != nil {
		t.Fatal(err)
	}
	out := &corev1.Pod{}
	if err := out.Unmarshal(b); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFields checks that each format prints the same from a pod masked to
// its Fields as from the whole pod, and that the fields are not the whole
// pod.
func TestFields(t *testing.T) {
	full := pod(corev1.PodRunning, running("a"), waiting("CrashLoopBackOff", 4, now.Add(-90*time.Second)))
	full.Namespace, full.UID = "shop", "00000000-0000-4000-8000-00000000c001"
	full.Labels = map[string]string{"app.kubernetes.io/name": "orders-api"}
	full.Spec.NodeName = "node-1"
	full.Status.PodIP = "10.244.1.31"
	full.Status.PodIPs = []corev1.PodIP{{IP: "10.244.1.31"}}
	for _, f := range []printer.Format{printer.Table, printer.Wide, printer.Name} {
		t.Run(string(f), func(t *testing.T) {
			print := func(p *corev1.Pod) string {
				var buf bytes.Buffer
				if err := printer.New(&buf, f, printer.WithNow(func() time.Time { return now })).PrintPod(p); err != nil {
					t.Fatal(err)
				}
				return buf.String()
			}
			masked := project(t, full, printer.Fields(f))
			if got, want := print(masked), print(full); got != want {
				t.Errorf("printed from Fields(%s)\n%s\nwant\n%s", f, got, want)
			}
			if masked.Labels != nil {
				t.Errorf("Fields(%s) selects metadata.labels, which %s does not print", f, f)
			}
		})
	}
	for _, f := range []printer.Format{printer.JSON, printer.YAML} {
		if got := printer.Fields(f); got != nil {
			t.Errorf("Fields(%s) = %q, want nil: it prints what it gets", f, got)
		}
	}
}

// TestWideUID checks that Wide prints the pod's UID.
func TestWideUID(t *testing.T) {
	p := pod(corev1.PodRunning, running("a"))
	p.UID = "00000000-0000-4000-8000-00000000a001"
	var buf bytes.Buffer
	if err := printer.New(&buf, printer.Wide, printer.WithNow(func() time.Time { return now })).PrintPod(p); err != nil {
		t.Fatal(err)
	}
	want := "NAMESPACE   NAME   READY   STATUS    RESTARTS   AGE   IP       NODE     UID\n" +
		"            p      1/1     Running   0          60m   <none>   <none>   00000000-0000-4000-8000-00000000a001\n"
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

// TestPrintMatchesRuntimeOnly prints a pod the pod source reported and one
// only the container runtime told of, as a table and as objects.
func TestPrintMatchesRuntimeOnly(t *testing.T) {
	rt := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "new", UID: "u1"}}
	ms := []client.Match{
		{Pod: pod(corev1.PodRunning, running("app")), Container: "app", Source: podsv1alpha1.MatchSource_MATCH_SOURCE_POD_SOURCE},
		{Pod: rt, Container: "app", Source: podsv1alpha1.MatchSource_MATCH_SOURCE_RUNTIME},
	}
	var table bytes.Buffer
	if err := printer.New(&table, printer.Table, printer.WithNow(func() time.Time { return now })).PrintMatches(ms); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(table.String()), "\n")
	if len(lines) != 3 || strings.Contains(lines[1], "runtime only") || !strings.Contains(lines[2], "(runtime only)") {
		t.Errorf("table:\n%s\nwant the second pod marked (runtime only), and only it", table.String())
	}
	var obj bytes.Buffer
	if err := printer.New(&obj, printer.JSON).PrintMatches(ms); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(obj.String(), printer.AnnotationRuntimeOnly); n != 1 {
		t.Errorf("JSON has %d %s annotations, want 1:\n%s", n, printer.AnnotationRuntimeOnly, obj.String())
	}
}
