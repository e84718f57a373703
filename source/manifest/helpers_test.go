package manifest_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/source/manifest"
	"github.com/podsapi/podsapi/test/podstest"
)

// testNode is the node name of the Sources under test.
const testNode = "node-1"

// callKind is the kind of one Sink call.
type callKind string

const (
	upsertCall callKind = "upsert"
	deleteCall callKind = "delete"
	syncedCall callKind = "synced"
	// returnedCall is no sink call: the harness records it when Run returns
	// before the test ends.
	returnedCall callKind = "returned"
)

// call is one recorded Sink call.
type call struct {
	kind callKind
	uid  types.UID
	pod  *corev1.Pod // Set for upserts.
	err  error       // Set for returnedCall.
}

// String renders the call for comparisons: "upsert ns/name uid",
// "delete uid" or "synced".
func (c call) String() string {
	switch c.kind {
	case upsertCall:
		return fmt.Sprintf("upsert %s/%s %s", c.pod.Namespace, c.pod.Name, c.uid)
	case deleteCall:
		return fmt.Sprintf("delete %s", c.uid)
	default:
		return string(c.kind)
	}
}

// recorder is a Sink that records every call on a channel. It is safe for
// concurrent use.
type recorder struct {
	calls chan call
}

var _ manifest.Sink = (*recorder)(nil)

func newRecorder() *recorder {
	return &recorder{calls: make(chan call, 4096)}
}

func (r *recorder) Upsert(pod *corev1.Pod) { r.calls <- call{kind: upsertCall, uid: pod.UID, pod: pod} }

func (r *recorder) Delete(uid types.UID) { r.calls <- call{kind: deleteCall, uid: uid} }

func (r *recorder) MarkSynced() { r.calls <- call{kind: syncedCall} }

// harness runs a Source on a directory and keeps the pods its sink holds.
type harness struct {
	t       *testing.T
	dir     string
	rec     *recorder
	reg     *prometheus.Registry
	pods    map[types.UID]*corev1.Pod
	markers int
}

// testLogger logs to the test's output, at debug level.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// start runs a Source on dir, with no periodic resync unless opts set one,
// until the test ends, and waits for MarkSynced.
func start(t *testing.T, dir string, opts ...manifest.Option) *harness {
	t.Helper()
	h := &harness{t: t, dir: dir, rec: newRecorder(), reg: prometheus.NewRegistry(), pods: make(map[types.UID]*corev1.Pod)}
	src := manifest.New(dir, testNode, append([]manifest.Option{
		manifest.WithLogger(testLogger(t)),
		manifest.WithRegisterer(h.reg),
		manifest.WithResyncInterval(-1),
	}, opts...)...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		err := src.Run(ctx, h.rec)
		if ctx.Err() == nil {
			h.rec.calls <- call{kind: returnedCall, err: err}
		}
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		err, ok := receive(t, done)
		if !ok {
			buf := make([]byte, 1<<20)
			t.Errorf("Run did not return after cancel before go test's -timeout came near; goroutines:\n%s", buf[:runtime.Stack(buf, true)])
			return
		}
		if err != nil {
			t.Errorf("Run returned %v after cancel, want nil", err)
		}
	})
	h.waitSynced()
	return h
}

// next returns the next sink call and applies it to h.pods.
func (h *harness) next() call {
	h.t.Helper()
	c, ok := receive(h.t, h.rec.calls)
	if !ok {
		h.t.Fatalf("no sink call before go test's -timeout came near; the sink holds %d pods", len(h.pods))
	}
	switch c.kind {
	case returnedCall:
		h.t.Fatalf("Run returned early: %v", c.err)
	case upsertCall:
		h.pods[c.uid] = c.pod
	case deleteCall:
		if _, ok := h.pods[c.uid]; !ok {
			h.t.Errorf("Delete(%s) of a pod the sink does not have", c.uid)
		}
		delete(h.pods, c.uid)
	}
	return c
}

// receive waits for a value from ch, bounded by the event and not by time:
// it gives up only when go test's -timeout is near (nine tenths of the time
// left), so that the test fails with its own message rather than be killed,
// and a busy machine slows the tests without failing them.
func receive[T any](t *testing.T, ch <-chan T) (T, bool) {
	expired, stop := podstest.NearDeadline(t)
	defer stop()
	select {
	case v := <-ch:
		return v, true
	case <-expired:
		var zero T
		return zero, false
	}
}

// waitSynced consumes the initial Upserts up to MarkSynced.
func (h *harness) waitSynced() {
	h.t.Helper()
	for {
		c := h.next()
		switch c.kind {
		case syncedCall:
			return
		case deleteCall:
			h.t.Fatalf("got %v before MarkSynced, want only upserts", c)
		}
	}
}

// expect consumes len(want) calls and compares them with want, in any
// order.
func (h *harness) expect(want ...string) {
	h.t.Helper()
	got := make([]string, 0, len(want))
	for range want {
		got = append(got, h.next().String())
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		h.t.Fatalf("sink calls:\n got %q\nwant %q", got, want)
	}
}

// quiet asserts that the Source made no sink call for the changes so far:
// it adds a marker manifest that sorts after every other file, expects
// exactly its Upsert, then removes it and expects exactly its Delete. File
// system events arrive in order, so any call caused by an earlier change
// would come first.
func (h *harness) quiet() {
	h.t.Helper()
	h.markers++
	name := fmt.Sprintf("zz-marker-%d", h.markers)
	file := name + ".yaml"
	writeFile(h.t, h.dir, file, podYAML("", name, "", "marker:1"))
	uid := manifest.DerivedUID("default", name, testNode)
	h.expect(fmt.Sprintf("upsert default/%s %s", name, uid))
	removeFile(h.t, h.dir, file)
	h.expect(fmt.Sprintf("delete %s", uid))
}

// pod returns the pod the sink holds with the namespace and name.
func (h *harness) pod(namespace, name string) *corev1.Pod {
	h.t.Helper()
	for _, p := range h.pods {
		if p.Namespace == namespace && p.Name == name {
			return p
		}
	}
	h.t.Fatalf("sink has no pod %s/%s; has %v", namespace, name, h.names())
	return nil
}

// names returns the sorted namespace/name of the pods the sink holds.
func (h *harness) names() []string {
	names := make([]string, 0, len(h.pods))
	for _, p := range h.pods {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	slices.Sort(names)
	return names
}

// errors returns the value of podsapi_manifest_errors_total for reason.
func (h *harness) errors(reason string) float64 {
	h.t.Helper()
	return errorCount(h.t, h.reg, reason)
}

// checkErrors compares the error counter with want, where a missing reason
// means zero.
func (h *harness) checkErrors(want map[string]float64) {
	h.t.Helper()
	for _, reason := range []string{"read", "decode", "invalid", "duplicate", "too_large", "not_regular"} {
		if got := h.errors(reason); got != want[reason] {
			h.t.Errorf("podsapi_manifest_errors_total{reason=%q} = %v, want %v", reason, got, want[reason])
		}
	}
}

// checkFreshRead asserts that a new Source on the same directory serves
// exactly the pods the sink holds now.
func (h *harness) checkFreshRead() {
	h.t.Helper()
	fresh := start(h.t, h.dir)
	if len(fresh.pods) != len(h.pods) {
		h.t.Fatalf("fresh read serves %v, incremental state is %v", fresh.names(), h.names())
	}
	for uid, want := range h.pods {
		got, ok := fresh.pods[uid]
		if !ok || !equality.Semantic.DeepEqual(got, want) {
			h.t.Errorf("fresh read of pod %s/%s (%s) differs from the incremental state:\n got %v\nwant %v",
				want.Namespace, want.Name, uid, got, want)
		}
	}
}

// errorCount gathers podsapi_manifest_errors_total{reason} from reg.
func errorCount(t *testing.T, reg prometheus.Gatherer, reason string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() != "podsapi_manifest_errors_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("podsapi_manifest_errors_total{reason=%q} is not registered", reason)
	return 0
}

// podYAML returns a minimal Pod manifest. Empty namespace and uid are left
// out.
func podYAML(namespace, name, uid, image string) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n")
	if namespace != "" {
		b.WriteString("  namespace: " + namespace + "\n")
	}
	if uid != "" {
		b.WriteString("  uid: " + uid + "\n")
	}
	b.WriteString("spec:\n  containers:\n  - name: main\n    image: " + image + "\n")
	return b.String()
}

// docs joins YAML documents with "---" lines.
func docs(documents ...string) string {
	return strings.Join(documents, "---\n")
}

// writeFiles writes name → content into dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		writeFile(t, dir, name, content)
	}
}

// writeFile writes the file in place (truncate, then write).
func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// replaceFile writes the content to a temporary file and renames it over
// name, as many editors and configuration tools do.
func replaceFile(t *testing.T, dir, name, content string) {
	t.Helper()
	tmp := filepath.Join(dir, name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	renameFile(t, dir, name+".tmp", name)
}

func renameFile(t *testing.T, dir, from, to string) {
	t.Helper()
	if err := os.Rename(filepath.Join(dir, from), filepath.Join(dir, to)); err != nil {
		t.Fatal(err)
	}
}

func removeFile(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// uidOf returns the derived UID of a pod on testNode.
func uidOf(namespace, name string) types.UID {
	return manifest.DerivedUID(namespace, name, testNode)
}
