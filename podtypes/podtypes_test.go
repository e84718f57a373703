package podtypes_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/podsapi/podsapi/podtypes"
)

// TestFieldsOf checks the value of every selectable field against the value
// the API server gives it.
func TestFieldsOf(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"},
		Spec: corev1.PodSpec{
			NodeName: "node-1", RestartPolicy: corev1.RestartPolicyAlways, SchedulerName: "default-scheduler",
			ServiceAccountName: "web", HostNetwork: true,
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, NominatedNodeName: "node-2",
			PodIPs: []corev1.PodIP{{IP: "10.0.0.7"}, {IP: "fd00::7"}},
		},
	}
	want := map[string]string{
		"metadata.name":            "a",
		"metadata.namespace":       "ns",
		"spec.nodeName":            "node-1",
		"spec.restartPolicy":       "Always",
		"spec.schedulerName":       "default-scheduler",
		"spec.serviceAccountName":  "web",
		"spec.hostNetwork":         "true",
		"status.phase":             "Running",
		"status.podIP":             "10.0.0.7", // the first of status.podIPs
		"status.nominatedNodeName": "node-2",
	}
	if len(want) != len(podtypes.SelectableFields) {
		t.Fatalf("%d selectable fields, the test knows %d", len(podtypes.SelectableFields), len(want))
	}
	f := podtypes.FieldsOf(pod)
	for _, name := range podtypes.SelectableFields {
		if !f.Has(name) || f.Get(name) != want[name] {
			t.Errorf("%s = %q (has %v), want %q", name, f.Get(name), f.Has(name), want[name])
		}
	}
	if f.Has("spec.containers") || f.Get("spec.containers") != "" {
		t.Error("spec.containers is selectable")
	}
	if sel := fields.ParseSelectorOrDie("status.phase=Running,spec.hostNetwork!=false"); !sel.Matches(f) {
		t.Errorf("%v does not match", sel)
	}
	if got := podtypes.FieldsOf(&corev1.Pod{}).Get("status.podIP"); got != "" {
		t.Errorf("status.podIP of a pod without IPs = %q, want empty", got)
	}
}

// TestEventTypeString checks the names of the event types.
func TestEventTypeString(t *testing.T) {
	for _, tc := range []struct {
		typ  podtypes.EventType
		want string
	}{
		{podtypes.Added, "ADDED"},
		{podtypes.Modified, "MODIFIED"},
		{podtypes.Deleted, "DELETED"},
		{podtypes.Synced, "SYNCED"},
		{0, "EventType(0)"},
		{9, "EventType(9)"},
	} {
		if got := tc.typ.String(); got != tc.want {
			t.Errorf("EventType(%d).String() = %q, want %q", int(tc.typ), got, tc.want)
		}
	}
}
