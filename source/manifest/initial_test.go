package manifest_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/source/manifest"
)

func TestInitialRead(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		files      map[string]string
		dirs       []string
		want       []string // namespace/name of the served pods.
		wantErrors map[string]float64
	}{
		{
			name: "empty directory",
		},
		{
			name: "YAML, multi-document YAML and JSON",
			files: map[string]string{
				"a.yaml": podYAML("", "alpha", "", "nginx:1"),
				"b.yml": "# Two pods, an empty document and a comment-only one.\n---\n" +
					docs(podYAML("kube-system", "beta", "", "busybox:1"), "", "# nothing here\n", podYAML("kube-system", "gamma", "", "busybox:1")),
				"c.json": `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "delta", "namespace": "tools"},
					"spec": {"containers": [{"name": "main", "image": "debian:12"}]}}`,
				"D.YAML": podYAML("", "epsilon", "", "nginx:1"),
			},
			want: []string{"default/alpha", "default/epsilon", "kube-system/beta", "kube-system/gamma", "tools/delta"},
		},
		{
			name: "comment-only file provides no pods",
			files: map[string]string{
				"a.yaml":     podYAML("", "alpha", "", "nginx:1"),
				"empty.yaml": "# Disabled.\n",
			},
			want: []string{"default/alpha"},
		},
		{
			name: "dotfiles, editor files, other extensions and subdirectories are ignored",
			files: map[string]string{
				"a.yaml":            podYAML("", "alpha", "", "nginx:1"),
				".hidden.yaml":      podYAML("", "hidden", "", "nginx:1"),
				".a.yaml.swp":       podYAML("", "swap", "", "nginx:1"),
				"a.yaml~":           podYAML("", "backup", "", "nginx:1"),
				"#a.yaml#":          podYAML("", "autosave", "", "nginx:1"),
				"notes.txt":         podYAML("", "notes", "", "nginx:1"),
				"README":            "not a manifest",
				"sub/nested.yaml":   podYAML("", "nested", "", "nginx:1"),
				"a.yaml.disabled":   podYAML("", "disabled", "", "nginx:1"),
				"kustomization.xml": "<x/>",
			},
			dirs: []string{"dir.yaml"},
			want: []string{"default/alpha"},
		},
		{
			name: "bad files are skipped and the good ones served",
			files: map[string]string{
				"good.yaml":          podYAML("", "good", "", "nginx:1"),
				"unknown-field.yaml": podYAML("", "unknown", "", "nginx:1") + "  hostnetwork: true\n",
				"duplicate-field.yaml": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: dup\n  name: dup2\n" +
					"spec:\n  containers:\n  - name: main\n    image: nginx:1\n",
				"wrong-kind.yaml":       strings.Replace(podYAML("", "deploy", "", "nginx:1"), "kind: Pod", "kind: Deployment", 1),
				"wrong-version.yaml":    strings.Replace(podYAML("", "v2", "", "nginx:1"), "apiVersion: v1", "apiVersion: apps/v1", 1),
				"no-kind.yaml":          strings.Replace(podYAML("", "nokind", "", "nginx:1"), "kind: Pod\n", "", 1),
				"bad-yaml.yaml":         "apiVersion: v1\nkind: Pod\nmetadata:\n  name: [unterminated\n",
				"wrong-type.yaml":       strings.Replace(podYAML("", "wrongtype", "", "nginx:1"), "containers:", "containers: 3\n  x:", 1),
				"bad-json.json":         `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "j"}`,
				"unknown-field.json":    `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "j2", "nam": "x"}}`,
				"one-bad-doc.yaml":      docs(podYAML("", "first-of-bad-file", "", "nginx:1"), podYAML("", "second", "", "nginx:1")+"  bogus: 1\n"),
				"no-name.yaml":          podYAML("", "", "", "nginx:1"),
				"bad-name.yaml":         podYAML("", "Not_A_Name", "", "nginx:1"),
				"bad-namespace.yaml":    podYAML("a/b", "slash", "", "nginx:1"),
				"z-good-after-bad.json": `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "late"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}`,
			},
			want: []string{"default/good", "default/late"},
			wantErrors: map[string]float64{
				"decode":  10,
				"invalid": 3,
			},
		},
		{
			name: "duplicates: the first by file name, then document, wins",
			files: map[string]string{
				"a.yaml": docs(podYAML("", "web", "", "nginx:a"), podYAML("", "web", "", "nginx:a2")),
				"b.yaml": docs(podYAML("", "web", "", "nginx:b"), podYAML("", "other", "", "nginx:b")),
				"c.yaml": podYAML("ns", "explicit", "00000000-0000-4000-8000-000000000001", "nginx:c"),
				"d.yaml": podYAML("ns", "explicit-too", "00000000-0000-4000-8000-000000000001", "nginx:d"),
				"e.yaml": podYAML("ns", "explicit", "00000000-0000-4000-8000-000000000002", "nginx:e"),
				"f.yaml": podYAML("elsewhere", "web", "", "nginx:f"),
			},
			want: []string{"default/other", "default/web", "elsewhere/web", "ns/explicit"},
			wantErrors: map[string]float64{
				"duplicate": 4,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFiles(t, dir, tt.files)
			for _, d := range tt.dirs {
				if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			h := start(t, dir)
			if got := h.names(); !slices.Equal(got, tt.want) {
				t.Errorf("served pods %q, want %q", got, tt.want)
			}
			h.checkErrors(tt.wantErrors)
		})
	}
}

func TestInitialReadDuplicateWinner(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"b.yaml": podYAML("", "web", "", "nginx:b"),
		"a.yaml": docs(podYAML("", "web", "", "nginx:a1"), podYAML("", "web", "", "nginx:a2")),
	})
	h := start(t, dir)
	if got := h.pod("default", "web").Spec.Containers[0].Image; got != "nginx:a1" {
		t.Errorf("served image %q, want nginx:a1 (first file, first document)", got)
	}
}

func TestMarkSyncedAfterInitialUpserts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"a.yaml": docs(podYAML("", "a1", "", "i"), podYAML("", "a2", "", "i")),
		"b.json": `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}`,
		"c.yml":  podYAML("", "c", "", "i"),
	})
	rec := newRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- manifest.New(dir, testNode, manifest.WithLogger(testLogger(t)), manifest.WithResyncInterval(-1)).Run(ctx, rec)
	}()
	h := &harness{t: t, dir: dir, rec: rec, pods: make(map[types.UID]*corev1.Pod)}
	var got []string
	for c := h.next(); c.kind != syncedCall; c = h.next() {
		got = append(got, c.String())
	}
	cancel()
	if err, ok := receive(t, done); !ok || err != nil {
		t.Errorf("Run returned %v (returned: %v) after cancel, want nil", err, ok)
	}
	// Upserts come in file name and document order, all before MarkSynced.
	want := []string{
		"upsert default/a1 " + string(uidOf("default", "a1")),
		"upsert default/a2 " + string(uidOf("default", "a2")),
		"upsert default/b " + string(uidOf("default", "b")),
		"upsert default/c " + string(uidOf("default", "c")),
	}
	if !slices.Equal(got, want) {
		t.Errorf("calls before MarkSynced:\n got %q\nwant %q", got, want)
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		manifest     string
		wantNS       string
		wantUID      types.UID
		wantPhase    corev1.PodPhase
		wantPodIP    string
		wantNodeName string
	}{
		{
			name:         "minimal manifest",
			manifest:     podYAML("", "minimal", "", "nginx:1"),
			wantNS:       "default",
			wantUID:      uidOf("default", "minimal"),
			wantPhase:    corev1.PodPending,
			wantNodeName: testNode,
		},
		{
			name:         "namespace kept and UID derived from it",
			manifest:     podYAML("kube-system", "minimal", "", "nginx:1"),
			wantNS:       "kube-system",
			wantUID:      uidOf("kube-system", "minimal"),
			wantPhase:    corev1.PodPending,
			wantNodeName: testNode,
		},
		{
			name:         "explicit UID kept",
			manifest:     podYAML("apps", "explicit", "7f3c2a10-0000-4000-8000-000000000042", "nginx:1"),
			wantNS:       "apps",
			wantUID:      "7f3c2a10-0000-4000-8000-000000000042",
			wantPhase:    corev1.PodPending,
			wantNodeName: testNode,
		},
		{
			name:         "spec.nodeName replaced by the node name",
			manifest:     strings.Replace(podYAML("", "elsewhere", "", "nginx:1"), "spec:\n", "spec:\n  nodeName: node-2\n", 1),
			wantNS:       "default",
			wantUID:      uidOf("default", "elsewhere"),
			wantPhase:    corev1.PodPending,
			wantNodeName: testNode,
		},
		{
			name:         "status kept",
			manifest:     podYAML("", "running", "", "nginx:1") + "status:\n  phase: Running\n  podIP: 10.0.0.7\n",
			wantNS:       "default",
			wantUID:      uidOf("default", "running"),
			wantPhase:    corev1.PodRunning,
			wantPodIP:    "10.0.0.7",
			wantNodeName: testNode,
		},
		{
			name:         "status without phase kept as is",
			manifest:     podYAML("", "ip-only", "", "nginx:1") + "status:\n  podIP: 10.0.0.8\n",
			wantNS:       "default",
			wantUID:      uidOf("default", "ip-only"),
			wantPhase:    "",
			wantPodIP:    "10.0.0.8",
			wantNodeName: testNode,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFile(t, dir, "pod.yaml", tt.manifest)
			h := start(t, dir)
			if len(h.pods) != 1 {
				t.Fatalf("served %v, want one pod", h.names())
			}
			for _, p := range h.pods {
				if p.Namespace != tt.wantNS || p.UID != tt.wantUID || p.Status.Phase != tt.wantPhase ||
					p.Status.PodIP != tt.wantPodIP || p.Spec.NodeName != tt.wantNodeName {
					t.Errorf("got namespace %q, uid %q, phase %q, podIP %q, nodeName %q; want %q, %q, %q, %q, %q",
						p.Namespace, p.UID, p.Status.Phase, p.Status.PodIP, p.Spec.NodeName,
						tt.wantNS, tt.wantUID, tt.wantPhase, tt.wantPodIP, tt.wantNodeName)
				}
				if p.APIVersion != "v1" || p.Kind != "Pod" {
					t.Errorf("got apiVersion %q, kind %q; want v1, Pod", p.APIVersion, p.Kind)
				}
			}
		})
	}
}

func TestRunSetupErrors(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file.yaml")
	if err := os.WriteFile(file, []byte(podYAML("", "a", "", "i")), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		dir      string
		nodeName string
		want     string
	}{
		{name: "missing directory", dir: filepath.Join(t.TempDir(), "missing"), nodeName: testNode, want: "no such file or directory"},
		{name: "not a directory", dir: file, nodeName: testNode, want: "not a directory"},
		{name: "empty node name", dir: t.TempDir(), nodeName: "", want: "node name is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// No deadline: Run must return with its error at once; one
			// that does not is stopped by go test's -timeout.
			ctx := t.Context()
			rec := newRecorder()
			err := manifest.New(tt.dir, tt.nodeName, manifest.WithLogger(testLogger(t))).Run(ctx, rec)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run returned %v, want an error containing %q", err, tt.want)
			}
			if n := len(rec.calls); n != 0 {
				t.Errorf("Run made %d sink calls, want none", n)
			}
		})
	}
}

func TestErrorsMetricExposition(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"bad.yaml":  podYAML("", "bad", "", "i") + "  bogus: true\n",
		"good.yaml": podYAML("", "good", "", "i"),
		"dup.yaml":  podYAML("", "good", "", "i"),
	})
	h := start(t, dir)
	want := `
# HELP podsapi_manifest_errors_total Static pod manifest documents or files that were rejected, by reason (read, decode, invalid, duplicate, too_large, not_regular).
# TYPE podsapi_manifest_errors_total counter
podsapi_manifest_errors_total{reason="decode"} 1
podsapi_manifest_errors_total{reason="duplicate"} 1
podsapi_manifest_errors_total{reason="invalid"} 0
podsapi_manifest_errors_total{reason="not_regular"} 0
podsapi_manifest_errors_total{reason="read"} 0
podsapi_manifest_errors_total{reason="too_large"} 0
`
	if err := testutil.GatherAndCompare(h.reg, strings.NewReader(want), "podsapi_manifest_errors_total"); err != nil {
		t.Error(err)
	}
}

func TestSharedRegisterer(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	dirA, dirB := t.TempDir(), t.TempDir()
	writeFile(t, dirA, "bad.yaml", "kind: Service\n")
	writeFile(t, dirB, "bad.yaml", "kind: Service\n")
	for _, dir := range []string{dirA, dirB} {
		start(t, dir, manifest.WithRegisterer(reg))
	}
	if got := errorCount(t, reg, "decode"); got != 2 {
		t.Errorf("shared podsapi_manifest_errors_total{reason=\"decode\"} = %v, want 2", got)
	}
}

func TestName(t *testing.T) {
	t.Parallel()
	if got, want := manifest.New("/etc/kubernetes/manifests/", testNode).Name(), "manifest:/etc/kubernetes/manifests"; got != want {
		t.Errorf("Name() = %q, want %q", got, want)
	}
}
