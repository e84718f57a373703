package nri_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	nrilog "github.com/containerd/nri/pkg/log"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/client"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/internal/hooks"
	"github.com/podsapi/podsapi/nri"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

func TestMain(m *testing.M) {
	// The runtime side logs through NRI's global logger: quiet, as
	// containerd's at its default level.
	nrilog.Set(quiet{})
	os.Exit(m.Run())
}

type quiet struct{}

func (quiet) Debugf(context.Context, string, ...any) {}
func (quiet) Infof(context.Context, string, ...any)  {}
func (quiet) Warnf(context.Context, string, ...any)  {}
func (quiet) Errorf(context.Context, string, ...any) {}

// runtimeSide is NRI's runtime side, as containerd embeds it
// (adaptation), on a socket of the test, with the pods and containers it
// lists when a plugin connects.
type runtimeSide struct {
	*adaptation.Adaptation
	socket string
	// synced receives each time a plugin has taken the synchronisation
	// and was added to the runtime's plugins; attempts each time the
	// runtime has tried to synchronise a plugin, in vain or not.
	synced   chan struct{}
	attempts chan struct{}

	mu         sync.Mutex
	pods       []*api.PodSandbox
	containers []*api.Container
}

// startRuntime starts the runtime side on socket, listing pods and
// containers to the plugins that connect, and stops it at the end of the
// test.
func startRuntime(t testing.TB, socket string, pods []*api.PodSandbox, containers []*api.Container) *runtimeSide {
	t.Helper()
	r := &runtimeSide{socket: socket, synced: make(chan struct{}, 16), attempts: make(chan struct{}, 64), pods: pods, containers: containers}
	syncFn := func(ctx context.Context, cb adaptation.SyncCB) error {
		r.mu.Lock()
		pods, containers := r.pods, r.containers
		r.mu.Unlock()
		updates, err := cb(ctx, pods, containers)
		if len(updates) > 0 {
			t.Errorf("podsapi asked for %d container updates at synchronisation", len(updates))
		}
		return err
	}
	updateFn := func(ctx context.Context, u []*adaptation.ContainerUpdate) ([]*adaptation.ContainerUpdate, error) {
		t.Errorf("podsapi asked for %d container updates", len(u))
		return nil, nil
	}
	dir := t.TempDir()
	a, err := adaptation.New("containerd", "v2.4.2", syncFn, updateFn,
		adaptation.WithSocketPath(socket), adaptation.WithPluginPath(dir), adaptation.WithPluginConfigPath(dir),
		adaptation.WithMetrics(&syncedMetrics{synced: r.synced, attempts: r.attempts}))
	if err != nil {
		t.Fatal(err)
	}
	r.Adaptation = a
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	return r
}

// syncedMetrics are the runtime side's metrics, which tell when a plugin
// has synchronised and joined the runtime's plugins: the runtime counts
// its plugins right after it adds one that took its synchronisation.
type syncedMetrics struct {
	synced   chan<- struct{}
	attempts chan<- struct{}
	pending  atomic.Bool
}

func (m *syncedMetrics) RecordPluginInvocation(_, op string, err error) {
	if op != "Synchronize" {
		return
	}
	if err == nil {
		m.pending.Store(true)
	}
	select {
	case m.attempts <- struct{}{}:
	default:
	}
}
func (m *syncedMetrics) RecordPluginLatency(string, string, time.Duration) {}
func (m *syncedMetrics) RecordPluginAdjustments(string, string, *adaptation.ContainerAdjustment, int, int) {
}
func (m *syncedMetrics) UpdatePluginCount(int) {
	if m.pending.Swap(false) {
		m.synced <- struct{}{}
	}
}

// waitSynced waits for podsapi to have connected and synchronised.
func (r *runtimeSide) waitSynced(t testing.TB) {
	t.Helper()
	select {
	case <-r.synced:
	case <-time.After(30 * time.Second):
		t.Fatal("podsapi did not connect to the runtime's NRI socket within 30s")
	}
}

// nriSocket returns a short socket path in a new temporary directory.
func nriSocket(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "nri")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "nri.sock")
}

// podsapi is a server connected to the NRI socket, its store (which no
// pod source feeds: the test reports pods itself), a client and its
// metrics.
type podsapi struct {
	st     *store.Store
	client *client.Client
	reg    *prometheus.Registry
}

// startPodsapi starts a server with --nri-socket socket and --host-proc
// proc, serving wrap(the store) when wrap is not nil.
func startPodsapi(t testing.TB, socket, proc string, wrap func(*store.Store) server.Pods, opts ...store.Option) *podsapi {
	t.Helper()
	st := store.New(opts...)
	st.MarkSynced()
	reg := prometheus.NewRegistry()
	var served server.Pods = st
	if wrap != nil {
		served = wrap(st)
	}
	srv := podstest.Start(t, served, server.Config{
		NRISocket: socket, HostProc: proc, Registry: reg,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
		Limits: server.LimitsConfig{QPS: -1, MaxFindWait: time.Hour},
		Hooks:  &hooks.Hooks{NRIBackoff: [2]time.Duration{5 * time.Millisecond, 50 * time.Millisecond}},
	})
	c, err := client.New(srv.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &podsapi{st: st, client: c, reg: reg}
}

// find returns "source namespace/name[/container][ (deleted)]" of each
// match of key, or the error.
func (p *podsapi) find(t testing.TB, key client.FindKey, opts ...client.CallOption) string {
	t.Helper()
	ms, _, err := p.client.FindPods(t.Context(), key, opts...)
	if err != nil {
		if errors.Is(err, client.ErrNotFound) {
			return "not found"
		}
		return "error: " + err.Error()
	}
	var out []string
	for _, m := range ms {
		s := strings.TrimPrefix(m.Source.String(), "MATCH_SOURCE_") + " " + m.Pod.Namespace + "/" + m.Pod.Name
		if m.Container != "" {
			s += "/" + m.Container
		}
		if m.Deleted {
			s += " (deleted)"
		}
		if m.Source == podsv1alpha1.MatchSource_MATCH_SOURCE_RUNTIME && (m.Pod.Spec.Containers != nil || m.Pod.Status.Phase != "") {
			s += " (a runtime match with more than the pod's identity)"
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// metric returns the value of the metric name with the labels, summed, or
// the count of a histogram.
func (p *podsapi) metric(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := p.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var v float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				v += m.Counter.GetValue()
			case m.Gauge != nil:
				v += m.Gauge.GetValue()
			case m.Histogram != nil:
				v += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return v
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			found = found || l.GetName() == labels[i] && l.GetValue() == labels[i+1]
		}
		if !found {
			return false
		}
	}
	return true
}

// A pod of the test, as the runtime and the pod source tell it.
type testPod struct {
	uid       types.UID
	name      string
	sandboxID string
	ip        string
}

func newTestPod(n int) testPod {
	return testPod{
		uid:       types.UID(fmt.Sprintf("6f3c2b1a-0d4e-4f5a-9b8c-%012x", n)),
		name:      fmt.Sprintf("web-%d", n),
		sandboxID: fmt.Sprintf("5a%062x", n),
		ip:        fmt.Sprintf("10.244.0.%d", n+1),
	}
}

// slice is the systemd slice of the pod, as the kubelet names it.
func (p testPod) slice() string {
	return "kubepods-besteffort-pod" + strings.ReplaceAll(string(p.uid), "-", "_") + ".slice"
}

// sandbox is the pod's sandbox as containerd sends it: systemd cgroups.
func (p testPod) sandbox() *api.PodSandbox {
	return &api.PodSandbox{
		Id: p.sandboxID, Name: p.name, Uid: string(p.uid), Namespace: "default",
		Labels: map[string]string{"app": "web"}, Ips: []string{p.ip},
		Linux: &api.LinuxPodSandbox{CgroupParent: p.slice(), CgroupsPath: p.slice() + ":cri-containerd:" + p.sandboxID},
	}
}

// container is a container of the pod as containerd sends it: PID 0
// until it starts.
func (p testPod) container(id, name string, pid uint32) *api.Container {
	return &api.Container{
		Id: id, PodSandboxId: p.sandboxID, Name: name, Pid: pid,
		State: api.ContainerState_CONTAINER_CREATED,
		Linux: &api.LinuxContainer{CgroupsPath: p.slice() + ":cri-containerd:" + id},
	}
}

// procCgroup is the line of /proc/PID/cgroup of a process of container id.
func (p testPod) procCgroup(id string) string {
	return "0::/kubepods.slice/kubepods-besteffort.slice/" + p.slice() + "/cri-containerd-" + id + ".scope"
}

// reported is the pod as the pod source reports it, with the containers'
// IDs in its status.
func (p testPod) reported(containers map[string]string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: p.name, UID: p.uid}}
	for name, id := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: name, Image: "nginx"})
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: name, ContainerID: "containerd://" + id})
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIPs = []corev1.PodIP{{IP: p.ip}}
	pod.Status.PodIP = p.ip
	return pod
}

func containerID(n int) string { return fmt.Sprintf("c0%062x", n) }

// TestFindBeforePodSource runs a sandbox and its containers through NRI's
// runtime side, and finds them by every key before the pod source reports
// them, through the real client, which shows where each match comes from.
func TestFindBeforePodSource(t *testing.T) {
	pod := newTestPod(1)
	app, side := containerID(1), containerID(2)
	// side runs in a cgroup of no kubelet naming (a runtime configured
	// with its own cgroup parent): found from the runtime's path.
	sideCgroup := "/custom.slice/app-" + side + ".scope"
	proc, err := podstest.WriteHostProc(t.TempDir(), map[int]string{
		4321: pod.procCgroup(app) + "\n",
		4322: "0::" + sideCgroup + "\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	socket := nriSocket(t)
	rt := startRuntime(t, socket, nil, nil)
	p := startPodsapi(t, socket, proc, nil)
	rt.waitSynced(t)
	ctx := t.Context()

	if got := p.find(t, client.ByContainerID(app)); got != "not found" {
		t.Fatalf("before the runtime ran the container: %s", got)
	}
	if err := rt.RunPodSandbox(ctx, &adaptation.RunPodSandboxRequest{Pod: pod.sandbox()}); err != nil {
		t.Fatal(err)
	}
	if err := rt.PostCreateContainer(ctx, &adaptation.PostCreateContainerRequest{Pod: pod.sandbox(), Container: pod.container(app, "app", 0)}); err != nil {
		t.Fatal(err)
	}
	// Created, not started: found by ID, cgroup and IP; by PID through
	// /proc/PID/cgroup.
	const runtimeApp = "RUNTIME default/web-1/app"
	for _, tc := range []struct {
		name string
		key  client.FindKey
		want string
	}{
		{"container ID", client.ByContainerID("containerd://" + app), runtimeApp},
		{"container ID prefix", client.ByContainerID(app[:12]), runtimeApp},
		{"cgroup", client.ByCgroup(pod.procCgroup(app)), runtimeApp},
		{"PID", client.ByPID(4321), runtimeApp},
		{"IP", client.ByIP(netip.MustParseAddr(pod.ip)), "RUNTIME default/web-1"},
	} {
		if got := p.find(t, tc.key); got != tc.want {
			t.Errorf("created, by %s: %s, want %s", tc.name, got, tc.want)
		}
	}

	s := pod.sandbox()
	sideC := pod.container(side, "side", 4322)
	sideC.Linux.CgroupsPath = sideCgroup
	if err := rt.PostCreateContainer(ctx, &adaptation.PostCreateContainerRequest{Pod: s, Container: sideC}); err != nil {
		t.Fatal(err)
	}
	if err := rt.PostStartContainer(ctx, &adaptation.PostStartContainerRequest{Pod: s, Container: sideC}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		key  client.FindKey
		want string
	}{
		{"cgroup of no kubelet naming", client.ByCgroup("0::" + sideCgroup), "RUNTIME default/web-1/side"},
		{"cgroup relative to a cgroup namespace", client.ByCgroup("0::/../app-" + side + ".scope"), "RUNTIME default/web-1/side"},
		{"PID in such a cgroup", client.ByPID(4322), "RUNTIME default/web-1/side"},
	} {
		if got := p.find(t, tc.key); got != tc.want {
			t.Errorf("started, by %s: %s, want %s", tc.name, got, tc.want)
		}
	}

	// The pod source reports the pod: the same keys find the whole pod.
	if n := p.metric(t, "podsapi_nri_report_delay_seconds"); n != 0 {
		t.Errorf("delays observed before the pod source reported: %v", n)
	}
	p.st.Upsert(pod.reported(map[string]string{"app": app, "side": side}))
	if got := p.find(t, client.ByContainerID(app)); got != "POD_SOURCE default/web-1/app" {
		t.Errorf("reported: %s", got)
	}
	if got := p.find(t, client.ByIP(netip.MustParseAddr(pod.ip))); got != "POD_SOURCE default/web-1" {
		t.Errorf("reported, by IP: %s", got)
	}
	if n := p.metric(t, "podsapi_nri_report_delay_seconds"); n != 2 {
		t.Errorf("report delays observed: %v, want 2 (one per container)", n)
	}
	for event, want := range map[string]float64{"synchronize": 1, "run_pod_sandbox": 1, "post_create_container": 2, "post_start_container": 1} {
		if got := p.metric(t, "podsapi_nri_events_total", "event", event); got != want {
			t.Errorf("podsapi_nri_events_total{event=%q} = %v, want %v", event, got, want)
		}
	}
	if got := p.metric(t, "podsapi_nri_connected"); got != 1 {
		t.Errorf("podsapi_nri_connected = %v", got)
	}
	if got := p.metric(t, "podsapi_nri_last_event_age_seconds"); got < 0 {
		t.Errorf("podsapi_nri_last_event_age_seconds = %v after events", got)
	}

	// The runtime removes a container and the pod source deletes the pod:
	// found as deleted only.
	if err := rt.RemoveContainer(ctx, &adaptation.RemoveContainerRequest{Pod: s, Container: sideC}); err != nil {
		t.Fatal(err)
	}
	p.st.Delete(pod.uid)
	if got := p.find(t, client.ByContainerID(side)); got != "not found" {
		t.Errorf("removed: %s", got)
	}
	if got := p.find(t, client.ByContainerID(side), client.WithDeleted()); got != "POD_SOURCE default/web-1/side (deleted)" {
		t.Errorf("removed, with deleted: %s", got)
	}
}

// runtimeProxy stands for the runtime's process at the NRI socket: it
// relays each connection to the runtime side listening on inner, and cut
// closes them all, as the exit of the runtime's process does (the
// adaptation's Stop leaves external plugins connected).
type runtimeProxy struct {
	inner string
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func startProxy(t testing.TB, socket, inner string) *runtimeProxy {
	t.Helper()
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	p := &runtimeProxy{inner: inner}
	p.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			r, err := net.Dial("unix", inner)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, r)
			p.mu.Unlock()
			p.wg.Go(func() { io.Copy(r, c); r.Close() })
			p.wg.Go(func() { io.Copy(c, r); c.Close() })
		}
	})
	t.Cleanup(func() {
		l.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

// cut closes every relayed connection.
func (p *runtimeProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestResync restarts the runtime side: podsapi connects again and
// resynchronises; a container removed while it was disconnected is gone,
// one created meanwhile is found.
func TestResync(t *testing.T) {
	pod := newTestPod(2)
	kept, removed, added := containerID(10), containerID(11), containerID(12)
	socket := nriSocket(t)
	inner := filepath.Join(filepath.Dir(socket), "rt.sock")
	proxy := startProxy(t, socket, inner)
	rt := startRuntime(t, inner, []*api.PodSandbox{pod.sandbox()},
		[]*api.Container{pod.container(kept, "kept", 100), pod.container(removed, "removed", 101)})
	p := startPodsapi(t, socket, t.TempDir(), nil)
	rt.waitSynced(t)
	if got := p.find(t, client.ByContainerID(removed)); got != "RUNTIME default/web-2/removed" {
		t.Fatalf("listed at synchronisation: %s", got)
	}

	// The runtime restarts; while podsapi is disconnected, one container
	// is removed and another created.
	rt.Stop()
	proxy.cut()
	rt2 := startRuntime(t, inner, []*api.PodSandbox{pod.sandbox()},
		[]*api.Container{pod.container(kept, "kept", 100), pod.container(added, "added", 102)})
	rt2.waitSynced(t)
	for _, tc := range []struct {
		id, want string
		opts     []client.CallOption
	}{
		{kept, "RUNTIME default/web-2/kept", nil},
		{added, "RUNTIME default/web-2/added", nil},
		{removed, "not found", nil},
		{removed, "RUNTIME default/web-2/removed (deleted)", []client.CallOption{client.WithDeleted()}},
	} {
		if got := p.find(t, client.ByContainerID(tc.id), tc.opts...); got != tc.want {
			t.Errorf("after the restart, %s: %s, want %s", tc.id[:8], got, tc.want)
		}
	}
	if got := p.metric(t, "podsapi_nri_connections_total"); got != 2 {
		t.Errorf("podsapi_nri_connections_total = %v, want 2", got)
	}
}

// TestMisbehavingRuntime: garbage on the socket, a flood of events and
// huge annotations neither crash podsapi nor grow what it keeps past its
// bound; it then takes a well-behaved runtime.
func TestMisbehavingRuntime(t *testing.T) {
	socket := nriSocket(t)
	// First, a peer that answers every connection with garbage.
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	garbage := make(chan struct{}, 64)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			junk := []byte(strings.Repeat(fmt.Sprintf("\x00\x00\x01\xff%08x garbage", i), 1000))
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			conn.Write(junk)
			conn.Close()
			garbage <- struct{}{}
		}
	})
	const bound = 256 << 10
	p := startPodsapi(t, socket, t.TempDir(), nil, store.WithRuntimeFacts(bound))
	for range 5 {
		select {
		case <-garbage:
		case <-time.After(30 * time.Second):
			t.Fatal("podsapi did not come back to the garbage")
		}
	}
	l.Close()
	wg.Wait()
	if got := p.find(t, client.ByIP(netip.MustParseAddr("10.1.1.1"))); got != "not found" {
		t.Fatalf("after the garbage: %s", got)
	}

	// Then a runtime that floods podsapi with containers and huge
	// annotations.
	rt := startRuntime(t, socket, nil, nil)
	rt.waitSynced(t)
	ctx := t.Context()
	pod := newTestPod(3)
	s := pod.sandbox()
	s.Annotations = map[string]string{"big": strings.Repeat("a", 4<<10)}
	const flood = 3000
	for i := range flood {
		c := pod.container(containerID(1000+i), "c", uint32(1000+i))
		c.Annotations = map[string]string{"big": strings.Repeat("b", 4<<10)}
		if i%1000 == 0 {
			// Huge annotations and environment, near the 4 MiB bound of
			// a ttrpc message: nothing of them is kept.
			c.Annotations["huge"] = strings.Repeat("h", 3<<20)
			c.Env = []string{strings.Repeat("E", 512<<10)}
		}
		if err := rt.PostCreateContainer(ctx, &adaptation.PostCreateContainerRequest{Pod: s, Container: c}); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	// Invalid facts: a name longer than any Kubernetes name, an ID with a
	// newline.
	bad := pod.container(containerID(1), strings.Repeat("n", 300), 7)
	badID := pod.container("bad\nid", "c", 8)
	for _, c := range []*api.Container{bad, badID} {
		if err := rt.PostCreateContainer(ctx, &adaptation.PostCreateContainerRequest{Pod: s, Container: c}); err != nil {
			t.Fatal(err)
		}
	}
	pods, containers, bytes := p.st.RuntimeLen()
	if bytes > bound || pods != 1 || containers == 0 || containers >= flood {
		t.Errorf("after the flood: %d pods, %d containers, %d bytes kept (bound %d)", pods, containers, bytes, bound)
	}
	if got := p.metric(t, "podsapi_nri_facts_refused_total", "reason", "bound"); got < float64(flood-containers) {
		t.Errorf("refused for the bound: %v, want at least %d", got, flood-containers)
	}
	if got := p.metric(t, "podsapi_nri_facts_refused_total", "reason", "invalid"); got != 2 {
		t.Errorf("refused as invalid: %v, want 2", got)
	}
	if got := p.metric(t, "podsapi_memory_used_bytes", "kind", "runtime"); got != float64(bytes) {
		t.Errorf("memory budget counts %v runtime bytes, the store %d", got, bytes)
	}
	if got := p.find(t, client.ByContainerID(containerID(1000))); got != "RUNTIME default/web-3/c" {
		t.Errorf("first of the flood: %s", got)
	}
	if got := p.find(t, client.ByContainerID(containerID(1))); got != "not found" {
		t.Errorf("invalid container: %s", got)
	}
	if got := p.metric(t, "podsapi_nri_connected"); got != 1 {
		t.Errorf("podsapi_nri_connected = %v after the flood", got)
	}
}

// stalledStore is a store whose runtime containers block until released.
type stalledStore struct {
	*store.Store
	entered chan struct{}
	release chan struct{}
}

func (s *stalledStore) PutRuntimeContainer(c store.RuntimeContainer) bool {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.release
	return s.Store.PutRuntimeContainer(c)
}

var _ nri.Sink = (*stalledStore)(nil)

// TestStalledPodsapiDoesNotHoldTheRuntime: a podsapi that stops answering
// delays the runtime no longer than NRI's plugin request timeout; the
// runtime drops it, and podsapi connects again and resynchronises.
func TestStalledPodsapiDoesNotHoldTheRuntime(t *testing.T) {
	const timeout = 500 * time.Millisecond
	adaptation.SetPluginRequestTimeout(timeout)
	t.Cleanup(func() { adaptation.SetPluginRequestTimeout(adaptation.DefaultPluginRequestTimeout) })
	pod := newTestPod(4)
	id := containerID(40)
	socket := nriSocket(t)
	rt := startRuntime(t, socket, nil, nil)
	stalled := &stalledStore{entered: make(chan struct{}, 1), release: make(chan struct{})}
	var once sync.Once
	unstall := func() { once.Do(func() { close(stalled.release) }) }
	t.Cleanup(unstall)
	p := startPodsapi(t, socket, t.TempDir(), func(st *store.Store) server.Pods { stalled.Store = st; return stalled })
	rt.waitSynced(t)
	<-rt.attempts // the synchronisation just taken

	ctx := t.Context()
	s, c := pod.sandbox(), pod.container(id, "app", 0)
	start := time.Now()
	if err := rt.PostCreateContainer(ctx, &adaptation.PostCreateContainerRequest{Pod: s, Container: c}); err != nil {
		t.Errorf("post-create with a stalled podsapi: %v", err)
	}
	<-stalled.entered
	c.Pid = 77
	if err := rt.StartContainer(ctx, &adaptation.StartContainerRequest{Pod: s, Container: c}); err != nil {
		t.Errorf("start with a stalled podsapi: %v", err)
	}
	if err := rt.PostStartContainer(ctx, &adaptation.PostStartContainerRequest{Pod: s, Container: c}); err != nil {
		t.Errorf("post-start with a stalled podsapi: %v", err)
	}
	// The runtime got here while podsapi is still stalled: it waited for
	// no more than its timeout.
	elapsed := time.Since(start)
	t.Logf("create and start with a stalled podsapi: %v (plugin request timeout %v)", elapsed, timeout)
	if elapsed < timeout {
		t.Errorf("the runtime took %v, less than its timeout %v: the stall was not exercised", elapsed, timeout)
	}

	// The runtime listed the container since: once podsapi is back, it
	// resynchronises and finds it.
	rt.mu.Lock()
	rt.pods, rt.containers = []*api.PodSandbox{s}, []*api.Container{c}
	rt.mu.Unlock()
	// podsapi, dropped by the runtime, connects again while its stalled
	// handler still holds: the runtime tries to synchronise it before
	// the handler returns.
	select {
	case <-rt.attempts:
	case <-time.After(30 * time.Second):
		t.Fatal("podsapi did not connect again within 30s")
	}
	unstall()
	rt.waitSynced(t)
	if got := p.find(t, client.ByContainerID(id)); got != "RUNTIME default/web-4/app" {
		t.Errorf("after the stall: %s", got)
	}
	// The stalled handler's facts (PID 0, from before the start) never
	// land after the synchronisation's (PID 77).
	if _, ms := p.st.FindPID(77, false); len(ms) != 1 {
		t.Errorf("the started container's PID 77 finds %d pods after the resynchronisation, want 1", len(ms))
	}
}

// TestNoRuntime: with --nri-socket naming a socket nobody serves, the
// server serves the pod source's pods unchanged, says it is not connected,
// and stops at once.
func TestNoRuntime(t *testing.T) {
	pod := newTestPod(5)
	id := containerID(50)
	p := startPodsapi(t, nriSocket(t), t.TempDir(), nil)
	p.st.Upsert(pod.reported(map[string]string{"app": id}))
	if got := p.find(t, client.ByContainerID(id)); got != "POD_SOURCE default/web-5/app" {
		t.Errorf("without a runtime: %s", got)
	}
	if got := p.metric(t, "podsapi_nri_connected"); got != 0 {
		t.Errorf("podsapi_nri_connected = %v without a runtime", got)
	}
	if got := p.metric(t, "podsapi_nri_last_event_age_seconds"); got != -1 {
		t.Errorf("podsapi_nri_last_event_age_seconds = %v without an event, want -1", got)
	}
}
