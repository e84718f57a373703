package main

import (
	"bytes"
	"context"
	"flag"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	"github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1/v1alpha1connect"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
	"github.com/podsapi/podsapi/test/sourcetest"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/")

// testTimeout bounds every wait of these tests.
const testTimeout = 20 * time.Second

// testNow is the clock of the tests: three days and four hours after the
// pods of podstest.Pod were created.
var testNow = time.Date(2026, 11, 4, 16, 0, 0, 0, time.UTC)

func TestMain(m *testing.M) {
	now = func() time.Time { return testNow }
	os.Exit(m.Run())
}

// at returns a time d after podstest's creation time.
func at(d time.Duration) metav1.Time {
	return metav1.NewTime(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC).Add(d))
}

// testPods returns pods in the states kubectl names: running, crash
// looping, completed, failed, initializing, terminating.
func testPods() []*corev1.Pod {
	running := podstest.Pod("default", "web-1", 1)

	crash := podstest.Pod("shop", "orders-api", 2)
	crash.Labels["app.kubernetes.io/name"] = "orders-api"
	cs := &crash.Status.ContainerStatuses[0]
	cs.Ready, cs.RestartCount = false, 7
	cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 5m0s restarting failed container"}}
	cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", FinishedAt: metav1.NewTime(testNow.Add(-4 * time.Minute))}}

	completed := podstest.Pod("batch", "report-29031840", 3)
	completed.Labels["app.kubernetes.io/name"] = "report"
	completed.Status.Phase = corev1.PodSucceeded
	for i := range completed.Status.ContainerStatuses {
		c := &completed.Status.ContainerStatuses[i]
		c.Ready = false
		c.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: at(time.Hour)}}
	}

	failed := podstest.Pod("batch", "report-29031900", 4)
	failed.Labels["app.kubernetes.io/name"] = "report"
	failed.Status.Phase = corev1.PodFailed
	for i := range failed.Status.ContainerStatuses {
		c := &failed.Status.ContainerStatuses[i]
		c.Ready = false
		c.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: at(time.Hour)}}
	}

	initializing := podstest.Pod("default", "web-2", 5)
	initializing.CreationTimestamp = metav1.NewTime(testNow.Add(-40 * time.Second))
	initializing.Status.Phase = corev1.PodPending
	initializing.Status.PodIPs, initializing.Status.PodIP = nil, ""
	initializing.Status.InitContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(testNow.Add(-30 * time.Second))}}
	initializing.Status.InitContainerStatuses[0].Ready = false
	for i := range initializing.Status.ContainerStatuses {
		c := &initializing.Status.ContainerStatuses[i]
		c.Ready, c.RestartCount = false, 0
		c.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
	}
	initializing.Status.Conditions = nil

	terminating := podstest.Pod("default", "web-0", 6)
	deleted := metav1.NewTime(testNow.Add(-10 * time.Second))
	terminating.DeletionTimestamp = &deleted
	terminating.DeletionGracePeriodSeconds = new(int64(30))

	return []*corev1.Pod{running, crash, completed, failed, initializing, terminating}
}

// startServer serves pods from a new store, synced unless unsynced, and
// returns the store and the socket.
func startServer(t *testing.T, cfg server.Config, unsynced bool, pods ...*corev1.Pod) (*store.Store, string) {
	t.Helper()
	st := store.New()
	for _, p := range pods {
		st.Upsert(p)
	}
	if !unsynced {
		st.MarkSynced()
	}
	srv := podstest.Start(t, st, cfg)
	return st, srv.SocketPath()
}

// run runs podsctl with args and returns its outputs and exit code.
func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var out, errOut bytes.Buffer
	err := Run(ctx, args, &out, &errOut)
	code = report(err, &errOut)
	return out.String(), errOut.String(), code
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run go test -update after checking it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// startKubelet serves pods with the kubelet's wire only, as a kubelet does,
// and returns it.
func startKubelet(t *testing.T, pods ...*corev1.Pod) *sourcetest.FakeKubelet {
	t.Helper()
	return sourcetest.NewFakeKubelet(t, podstest.SocketPath(t), pods...)
}

// wires are the servers and wires podsctl's outputs are checked against:
// each must print the same.
var wires = []struct {
	name    string
	kubelet bool     // whether the server is a kubelet rather than podsapi
	args    []string // the --wire flag
}{
	{"Podsapi", false, nil},
	{"PodsapiExplicit", false, []string{"--wire", "podsapi"}},
	{"PodsapiKubeletWire", false, []string{"--wire", "kubelet"}},
	{"Kubelet", true, nil},
	{"KubeletExplicit", true, []string{"--wire=kubelet"}},
}

func TestListAndGetGolden(t *testing.T) {
	for _, wire := range wires {
		t.Run(wire.name, func(t *testing.T) {
			pods := testPods()
			var socket string
			if wire.kubelet {
				socket = startKubelet(t, pods...).Path()
			} else {
				_, socket = startServer(t, server.Config{Limits: server.LimitsConfig{QPS: -1}}, false, pods...)
			}
			testListAndGetGolden(t, pods, slices.Concat([]string{"--socket", socket}, wire.args))
		})
	}
}

// testListAndGetGolden checks the outputs of list and get, run with the
// global flags global after the command and before it, against the golden
// files.
func testListAndGetGolden(t *testing.T, pods []*corev1.Pod, global []string) {
	t.Helper()
	uid := string(pods[1].UID)
	ref := pods[1].Namespace + "/" + pods[1].Name
	tests := []struct {
		name   string
		args   []string
		golden string
	}{
		{"ListTable", []string{"list"}, "list.txt"},
		{"ListWide", []string{"list", "-o", "wide"}, "list-wide.txt"},
		{"ListJSON", []string{"list", "-o", "json"}, "list.json"},
		{"ListYAML", []string{"list", "--output=yaml"}, "list.yaml"},
		{"ListName", []string{"list", "-o", "name"}, "list-name.txt"},
		{"ListNamespace", []string{"list", "-n", "default"}, "list-namespace.txt"},
		{"ListSelector", []string{"list", "-l", "app.kubernetes.io/name in (report, orders-api),tier"}, "list-selector.txt"},
		{"ListFieldsYAML", []string{"list", "--fields", "metadata.name,status.phase", "-o", "yaml", "--namespace", "batch"}, "list-fields.yaml"},
		{"ListFieldSelector", []string{"list", "--field-selector", "status.phase!=Running,metadata.namespace=batch", "-o", "name"}, "list-field-selector.txt"},
		{"ListAllSelectors", []string{"list", "-n", "batch", "-l", "tier", "--field-selector=status.phase=Failed", "--fields", "metadata.name", "-o", "json"}, "list-all-selectors.json"},
		// A table requests its columns' fields with --fields: it prints
		// what it prints without.
		{"ListFieldsTable", []string{"list", "--fields", "metadata.name,status.phase"}, "list.txt"},
		{"ListFieldsWide", []string{"list", "--fields=metadata.name", "-o", "wide"}, "list-wide.txt"},
		{"ListFieldsName", []string{"list", "--fields", "status.phase", "-o", "name"}, "list-name.txt"},
		{"GetTable", []string{"get", uid}, "get.txt"},
		{"GetWide", []string{"get", uid, "-o", "wide"}, "get-wide.txt"},
		{"GetJSON", []string{"get", "-o", "json", uid}, "get.json"},
		{"GetYAML", []string{"get", uid, "-o", "yaml"}, "get.yaml"},
		{"GetName", []string{"get", uid, "-o", "name"}, "get-name.txt"},
		{"GetFieldsJSON", []string{"get", uid, "--fields", "status.podIPs,status.containerStatuses.ready", "-o", "json"}, "get-fields.json"},
		{"GetFieldsTable", []string{"get", uid, "--fields", "status.phase"}, "get.txt"},
		// NAMESPACE/NAME prints what the UID prints, field masks included.
		{"GetRefTable", []string{"get", ref}, "get.txt"},
		{"GetRefWide", []string{"get", "-o", "wide", ref}, "get-wide.txt"},
		{"GetRefYAML", []string{"get", ref, "-o", "yaml"}, "get.yaml"},
		{"GetRefFieldsJSON", []string{"get", ref, "--fields", "status.podIPs,status.containerStatuses.ready", "-o", "json"}, "get-fields.json"},
		{"GetRefFieldsTable", []string{"get", ref, "--fields", "status.phase"}, "get.txt"},
	}
	for _, tt := range tests {
		for _, order := range []struct {
			name string
			args []string
		}{
			{"FlagsAfter", slices.Concat(tt.args, global)},
			{"FlagsBefore", slices.Concat(global, tt.args)},
		} {
			t.Run(tt.name+"/"+order.name, func(t *testing.T) {
				stdout, stderr, code := run(t, order.args...)
				if code != 0 || stderr != "" {
					t.Fatalf("podsctl %q: exit %d, stderr %q", order.args, code, stderr)
				}
				golden(t, tt.golden, stdout)
			})
		}
	}
}

func TestListNothing(t *testing.T) {
	_, socket := startServer(t, server.Config{}, false, testPods()...)
	stdout, stderr, code := run(t, "list", "--socket", socket, "-n", "nope")
	if code != 0 || stdout != "" || stderr != "No resources found.\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestSocketEnv checks that PODSAPI_SOCKET sets the default socket.
func TestSocketEnv(t *testing.T) {
	_, socket := startServer(t, server.Config{}, false, testPods()...)
	t.Setenv(socketEnv, "unix://"+socket)
	stdout, stderr, code := run(t, "list", "-o", "name", "-n", "shop")
	if code != 0 || stdout != "pod/orders-api\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// writes is an io.Writer that sends each write on a channel.
type writes chan string

func (w writes) Write(p []byte) (int, error) {
	w <- string(p)
	return len(p), nil
}

// next returns the next write.
func (w writes) next(t *testing.T) string {
	t.Helper()
	select {
	case s := <-w:
		return s
	case <-time.After(testTimeout):
		t.Fatal("podsctl watch printed nothing more")
		return ""
	}
}

func TestWatchGolden(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		golden string
	}{
		{"Table", nil, "watch.txt"},
		{"Wide", []string{"-o", "wide"}, "watch-wide.txt"},
		{"JSON", []string{"-o", "json"}, "watch.json"},
		{"YAML", []string{"-o", "yaml"}, "watch.yaml"},
		{"Name", []string{"-o", "name"}, "watch-name.txt"},
		{"Selector", []string{"-l", "tier=web", "-o", "name"}, "watch-selector.txt"},
		{"FieldSelector", []string{"--field-selector", "metadata.namespace!=kube-system", "-o", "name"}, "watch-field-selector.txt"},
	}
	for _, wire := range wires {
		for _, tt := range tests {
			t.Run(wire.name+"/"+tt.name, func(t *testing.T) {
				testWatchGolden(t, wire.kubelet, slices.Concat(wire.args, tt.args), tt.golden)
			})
		}
	}
}

// testWatchGolden checks the output of watch, run with args, against the
// golden file, on podsapi or on a kubelet.
func testWatchGolden(t *testing.T, kubelet bool, args []string, goldenFile string) {
	t.Helper()
	pods := testPods()[:3]
	var upsert func(*corev1.Pod)
	var remove func(*corev1.Pod)
	var socket string
	if kubelet {
		k := startKubelet(t, pods...)
		socket, upsert, remove = k.Path(), k.Set, k.Remove
	} else {
		var st *store.Store
		st, socket = startServer(t, server.Config{}, false, pods...)
		upsert, remove = st.Upsert, func(p *corev1.Pod) { st.Delete(p.UID) }
	}
	out, _ := startWatch(t, append([]string{"--socket", socket}, args...)...)

	var got strings.Builder
	for !strings.Contains(got.String(), "SYNCED") {
		got.WriteString(out.next(t))
	}
	// A change, a pod leaving the selector, a deletion.
	changed := pods[0].DeepCopy()
	changed.ResourceVersion = "2"
	changed.Status.ContainerStatuses[0].RestartCount = 1
	upsert(changed)
	relabelled := pods[1].DeepCopy()
	relabelled.ResourceVersion = "2"
	relabelled.Labels["tier"] = "api"
	upsert(relabelled)
	remove(pods[2])
	for range 3 {
		got.WriteString(out.next(t))
	}
	golden(t, goldenFile, got.String())
}

// scriptedKubelet is a kubelet's Pods service whose watches send events, as
// they are, then wait for the client to leave.
type scriptedKubelet struct {
	v1alpha1connect.UnimplementedPodsHandler
	events []*v1alpha1.WatchPodsEvent
}

func (k scriptedKubelet) WatchPods(ctx context.Context, _ *connect.Request[v1alpha1.WatchPodsRequest], stream *connect.ServerStream[v1alpha1.WatchPodsEvent]) error {
	for _, ev := range k.events {
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return nil
}

// serveKubelet serves h as the kubelet's wire on a fresh socket until the
// end of the test.
func serveKubelet(t *testing.T, h v1alpha1connect.PodsHandler) string {
	t.Helper()
	path := podstest.SocketPath(t)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(v1alpha1connect.NewPodsHandler(h))
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, Protocols: protocols, ReadHeaderTimeout: testTimeout}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return path
}

// TestWatchChangesBeforeMarker checks that changes a kubelet sends before
// its INITIAL_SYNC_COMPLETE (it may: its watcher registers before it reads
// the snapshot) are folded into the snapshot podsctl prints.
func TestWatchChangesBeforeMarker(t *testing.T) {
	pods := testPods()
	web1, orders := pods[0], pods[1]
	changed := web1.DeepCopy()
	changed.ResourceVersion = "2"
	changed.Status.ContainerStatuses[1].RestartCount = 5
	ev := func(typ v1alpha1.EventType, p *corev1.Pod) *v1alpha1.WatchPodsEvent {
		raw, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return &v1alpha1.WatchPodsEvent{Type: typ, Pod: raw}
	}
	socket := serveKubelet(t, scriptedKubelet{events: []*v1alpha1.WatchPodsEvent{
		ev(v1alpha1.EventType_ADDED, orders),
		ev(v1alpha1.EventType_ADDED, web1),
		ev(v1alpha1.EventType_MODIFIED, changed),
		ev(v1alpha1.EventType_ADDED, changed), // a duplicate
		ev(v1alpha1.EventType_DELETED, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: orders.Namespace, Name: orders.Name, UID: orders.UID}}),
		{Type: v1alpha1.EventType_INITIAL_SYNC_COMPLETE},
	}})
	out, _ := startWatch(t, "--socket", socket)
	got := out.next(t)
	want := "EVENT      NAMESPACE   NAME    READY   STATUS    RESTARTS   AGE\n" +
		"ADDED      default     web-1   2/2     Running   5          3d4h\n" +
		"SYNCED\n"
	if got != want {
		t.Fatalf("podsctl watch printed\n%s\nwant\n%s", got, want)
	}
}

// TestWatchFieldsTable checks that a watch's table with --fields prints
// what it prints without, changes included: the table's fields are watched
// too, so a restart shows although --fields names only the phase.
func TestWatchFieldsTable(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("testdata", "watch.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(want), "\n")
	for _, wire := range wires {
		t.Run(wire.name, func(t *testing.T) {
			pods := testPods()[:3]
			var upsert func(*corev1.Pod)
			var socket string
			if wire.kubelet {
				k := startKubelet(t, pods...)
				socket, upsert = k.Path(), k.Set
			} else {
				var st *store.Store
				st, socket = startServer(t, server.Config{}, false, pods...)
				upsert = st.Upsert
			}
			out := make(writes, 100)
			var stderr bytes.Buffer
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			args := slices.Concat([]string{"watch", "--fields", "status.phase", "--socket", socket}, wire.args)
			go func() { done <- Run(ctx, args, out, &stderr) }()
			defer func() {
				cancel()
				select {
				case err := <-done:
					if err != nil {
						t.Errorf("watch ended with %v after cancellation, want nil", err)
					}
				case <-time.After(testTimeout):
					t.Error("watch did not end after cancellation")
				}
			}()
			var got strings.Builder
			for !strings.Contains(got.String(), "SYNCED") {
				got.WriteString(out.next(t))
			}
			changed := pods[0].DeepCopy()
			changed.ResourceVersion = "2"
			changed.Status.ContainerStatuses[0].RestartCount = 1
			upsert(changed)
			got.WriteString(out.next(t))
			if w := strings.Join(lines[:6], ""); got.String() != w {
				t.Fatalf("podsctl %q printed\n%s\nwant\n%s", args[:3], got.String(), w)
			}
		})
	}
}

// TestMaskedJSONPrintsOnlyTheMask is finding 2 of issue 36 as a user hits
// it: with --fields, -o json and -o yaml print the fields the mask kept, as
// the server sent them, and no zero value the mask left out (a restart
// count of 0 for a container that restarted 7 times).
func TestMaskedJSONPrintsOnlyTheMask(t *testing.T) {
	_, socket := startServer(t, server.Config{}, false, testPods()...)
	for _, tc := range []struct {
		name      string
		args      []string
		want, not []string
	}{
		{"ready only", []string{"get", "shop/orders-api", "--fields", "status.containerStatuses.ready", "-o", "json"},
			[]string{`"ready": false`, `"name": "orders-api"`}, []string{"restartCount", `"image"`, `"name": ""`, `"spec"`}},
		{"restart count asked", []string{"get", "shop/orders-api", "--fields", "status.containerStatuses.restartCount", "-o", "yaml"},
			[]string{"restartCount: 7"}, []string{"ready:", "image:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := run(t, append(tc.args, "--socket", socket)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("output lacks %s:\n%s", w, stdout)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(stdout, n) {
					t.Errorf("output has %s, which the mask left out:\n%s", n, stdout)
				}
			}
		})
	}
}
