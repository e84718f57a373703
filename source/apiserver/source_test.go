package apiserver_test

import (
	"context"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/source/apiserver"
	"github.com/podsapi/podsapi/test/kubetest"
	"github.com/podsapi/podsapi/test/sourcetest"
)

func TestName(t *testing.T) {
	tests := []struct {
		name string
		opts []apiserver.Option
		want string
	}{
		{name: "in-cluster", want: "apiserver:in-cluster"},
		{name: "kubeconfig", opts: []apiserver.Option{apiserver.WithKubeconfig("/etc/k.conf")}, want: "apiserver:/etc/k.conf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := apiserver.New("n", tt.opts...).Name(); got != tt.want {
				t.Errorf("Name() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRunCannotStart(t *testing.T) {
	garbage := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(garbage, []byte("{not yaml: ["), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		node string
		opts []apiserver.Option
		want string
	}{
		{name: "empty node name", want: "node name is empty"},
		{name: "missing kubeconfig", node: "n", opts: []apiserver.Option{apiserver.WithKubeconfig("/nonexistent/k")}, want: "kubeconfig /nonexistent/k"},
		{name: "unparsable kubeconfig", node: "n", opts: []apiserver.Option{apiserver.WithKubeconfig(garbage)}, want: "kubeconfig " + garbage},
		{name: "outside a cluster", node: "n", want: "in-cluster configuration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "outside a cluster" && os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
				t.Skip("running in a cluster")
			}
			err := apiserver.New(tt.node, tt.opts...).Run(t.Context(), sourcetest.NewRecorder())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

const (
	node      = "node-a"
	namespace = "src"
	staticUID = "static-0123456789abcdef"
)

// harness runs a Source against a real API server, through a proxy the
// test cuts to take the API server away.
type harness struct {
	cp    *kubetest.ControlPlane
	proxy *kubetest.Proxy
	rec   *sourcetest.Recorder
	reg   *prometheus.Registry
	logs  *sourcetest.Logs
}

func start(t *testing.T) *harness {
	t.Helper()
	cp := kubetest.Start(t)
	h := &harness{cp: cp, proxy: kubetest.NewProxy(t, cp.Host()), rec: sourcetest.NewRecorder(),
		reg: prometheus.NewRegistry(), logs: sourcetest.NewLogs(t)}
	if _, err := cp.Admin.CoreV1().Namespaces().Create(t.Context(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return h
}

// run starts the Source, with fast backoff.
func (h *harness) run(t *testing.T) {
	src := apiserver.New(node,
		apiserver.WithKubeconfig(h.cp.Kubeconfig(t, kubetest.AdminUser, h.proxy.Addr())),
		apiserver.WithLogger(h.logs.Logger()),
		apiserver.WithRegisterer(h.reg),
		apiserver.WithBackoff(10*time.Millisecond, 200*time.Millisecond))
	sourcetest.Run(t, func(ctx context.Context) error { return src.Run(ctx, h.rec) })
}

func (h *harness) create(t *testing.T, name, nodeName string, annotations map[string]string) types.UID {
	t.Helper()
	pod, err := h.cp.Admin.CoreV1().Pods(namespace).Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod.UID
}

func (h *harness) setPhase(t *testing.T, name string, phase corev1.PodPhase) {
	t.Helper()
	pods := h.cp.Admin.CoreV1().Pods(namespace)
	pod, err := pods.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = phase
	if _, err := pods.UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) metric(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	v, ok := sourcetest.MetricValue(t, h.reg, name, labels)
	if !ok {
		t.Fatalf("%s%v is not exported", name, labels)
	}
	return v
}

var apiLabels = map[string]string{"source": "apiserver"}

// TestAPIServerRelistSendsOnlyChanges forces a 410 Gone: while the Source is
// cut off, pods change, etcd is compacted and the API server restarts with
// an empty watch cache, so that the watch cannot resume. The relist must
// send the sink exactly the changes: no Upsert of a pod that did not change.
func TestAPIServerRelistSendsOnlyChanges(t *testing.T) {
	h := start(t)
	a := h.create(t, "a", node, nil)
	b := h.create(t, "b", node, nil)
	h.create(t, "other", "node-b", nil)
	h.create(t, "static", node, map[string]string{corev1.MirrorPodAnnotationKey: staticUID})
	h.run(t)
	s := h.rec.WaitPods(t, nil, a, b, staticUID)
	if got := s.Pods[staticUID]; got.Name != "static" || got.ManagedFields != nil {
		t.Errorf("the mirror pod is %s/%s with %d managed fields, want static without", got.Namespace, got.Name, len(got.ManagedFields))
	}
	if v := h.metric(t, "podsapi_source_connected", apiLabels); v != 1 {
		t.Errorf("podsapi_source_connected = %v after the first list, want 1", v)
	}
	n := len(s.Calls)

	h.proxy.Cut()
	h.logs.Wait(slog.LevelWarn, "API server unavailable: serving the last known pods", 1)
	if err := h.cp.Admin.CoreV1().Pods(namespace).Delete(t.Context(), "b", *metav1.NewDeleteOptions(0)); err != nil {
		t.Fatal(err)
	}
	h.setPhase(t, "a", corev1.PodFailed)
	c := h.create(t, "c", node, nil)
	h.cp.CompactEtcd(t)
	h.cp.StopAPIServer(t)
	h.cp.StartAPIServer(t)
	h.proxy.Restore(t)

	s = h.rec.WaitPods(t, func(p *corev1.Pod) bool { return p.Name != "a" || p.Status.Phase == corev1.PodFailed }, a, c, staticUID)
	var got []string
	for _, call := range s.Calls[n:] {
		got = append(got, call.String())
	}
	// b may first be modified (its deletion timestamp) if the watch saw it
	// before the cut ended.
	got = slices.DeleteFunc(got, func(c string) bool { return c == "upsert src/b "+string(b) })
	want := []string{"delete " + string(b), "upsert src/a " + string(a), "upsert src/c " + string(c)}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("sink calls after the relist = %q, want %q (no upsert of the unchanged mirror pod)", got, want)
	}
	h.logs.Wait(slog.LevelInfo, "API server available again", 1)
	h.logs.Wait(slog.LevelInfo, "relisted the node's pods", 1)
	if got := h.logs.Count(slog.LevelWarn, "API server unavailable"); got != 1 {
		t.Errorf("the outage was logged %d times at warning level, want once", got)
	}
	if v := h.metric(t, "podsapi_source_relists_total", apiLabels); v != 1 {
		t.Errorf("podsapi_source_relists_total = %v, want 1", v)
	}
	if v := h.metric(t, "podsapi_source_connected", apiLabels); v != 1 {
		t.Errorf("podsapi_source_connected = %v after the recovery, want 1", v)
	}
	errs := 0.0
	for _, reason := range []string{"list", "watch"} {
		errs += sourcetest.SourceErrors(t, h.reg, "apiserver", reason)
	}
	if errs < 1 {
		t.Errorf("podsapi_source_errors_total{reason=~list|watch} = %v, want at least 1", errs)
	}
	if v := h.metric(t, "podsapi_source_last_success_timestamp_seconds", apiLabels); v <= 0 {
		t.Errorf("podsapi_source_last_success_timestamp_seconds = %v, want > 0", v)
	}
	if uids := slices.Sorted(maps.Keys(s.Pods)); len(uids) != 3 {
		t.Errorf("sink pods %v, want 3", uids)
	}
}
