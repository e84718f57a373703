package door_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/podsapi/podsapi/kubeapi"
	"github.com/podsapi/podsapi/kubeapi/door"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/kubetest"
	"github.com/podsapi/podsapi/test/podstest"
)

// The watches of the door on the real clock, through its real listeners
// (HTTPS with HTTP/2 and HTTP/1.1), with every timer of the door and of
// kubeapi made short: they must outlive all of them, as the API server's
// watches do. The timers below are chosen so that the old write deadline
// (set before each write and never cleared) would end an idle watch: the
// write timeout is shorter than the bookmark interval.
const (
	// The write timeout leaves the server's own goroutines 2 s to write
	// a small event into the socket even on a machine loaded 20 times over.
	shortWrite    = 2 * time.Second // kubeapi.WithWriteTimeout, door.Config.WriteTimeout
	shortBookmark = 4 * time.Second
	shortIdle     = time.Second // door.Config.IdleTimeout, ReadHeaderTimeout
	// idleFor outlives every timer above three times over.
	idleFor = 3 * shortBookmark
)

// nodeName is the node of podstest.Pod's pods; pinned selects them.
const (
	nodeName = "node-1"
	pinned   = "spec.nodeName=" + nodeName
)

// watchRig is the real kubeapi.Handler of a store behind a door that
// authenticates and authorizes with a real API server, served with short
// timers, counting the requests it is sent by user agent.
type watchRig struct {
	cp  *kubetest.ControlPlane
	st  *store.Store
	s   *served
	reg *prometheus.Registry

	mu       sync.Mutex
	requests map[string]map[string]int // user agent → "proto verb" → count
}

// newWatchRig starts the API server and the door, with pods in namespace
// "a" on the node, the short timers above, and a store with opts.
func newWatchRig(t *testing.T, pods int, opts ...store.Option) *watchRig {
	t.Helper()
	return newWatchRigTimers(t, pods, shortWrite, shortBookmark, opts...)
}

// newWatchRigTimers is newWatchRig with the write timeout (kubeapi's and
// HTTP/2's) and bookmark interval given.
func newWatchRigTimers(t *testing.T, pods int, write, bookmark time.Duration, opts ...store.Option) *watchRig {
	t.Helper()
	cp := kubetest.Start(t, nsReader, nsLister, nobody)
	grantRoles(t, cp)
	return newWatchRigOn(t, cp, pods, write, bookmark, opts...)
}

// newWatchRigOn is newWatchRigTimers on the API server cp, whose roles
// grantRoles has given.
func newWatchRigOn(t *testing.T, cp *kubetest.ControlPlane, pods int, write, bookmark time.Duration, opts ...store.Option) *watchRig {
	t.Helper()
	rig := &watchRig{cp: cp, st: store.New(opts...), reg: prometheus.NewRegistry(), requests: map[string]map[string]int{}}
	for i := range pods {
		rig.st.Upsert(podstest.Pod(nsAllowed, fmt.Sprintf("pa-%d", i), i))
	}
	rig.st.MarkSynced()
	own := cp.Config(kubetest.AdminUser, cp.Host())
	auth, err := door.NewAuth(own)
	if err != nil {
		t.Fatal(err)
	}
	pass, err := door.NewPassThrough(own)
	if err != nil {
		t.Fatal(err)
	}
	var d *door.Door
	local := kubeapi.New(rig.st, nodeName,
		kubeapi.WithWriteTimeout(write), kubeapi.WithBookmarkInterval(bookmark),
		kubeapi.WithWatchEnded(func(r *http.Request, end kubeapi.WatchEnd) { d.WatchEnded(r, end) }))
	d = door.New(local, door.WithAuth(auth), door.WithPassThrough(pass), door.WithRegisterer(rig.reg))
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/pods") {
			verb := "list"
			if r.URL.Query().Get("watch") == "true" {
				verb = "watch"
			}
			rig.mu.Lock()
			if rig.requests[r.UserAgent()] == nil {
				rig.requests[r.UserAgent()] = map[string]int{}
			}
			rig.requests[r.UserAgent()][r.Proto+" "+verb]++
			rig.mu.Unlock()
		}
		d.ServeHTTP(w, r)
	})
	rig.s = serve(t, counted, door.Config{
		ReadHeaderTimeout: shortIdle, IdleTimeout: shortIdle, WriteTimeout: write,
	})
	return rig
}

// requestsOf returns the requests for pods sent by the user agent, as
// "proto verb" → count.
func (rig *watchRig) requestsOf(agent string) map[string]int {
	rig.mu.Lock()
	defer rig.mu.Unlock()
	out := map[string]int{}
	for k, v := range rig.requests[agent] {
		out[k] = v
	}
	return out
}

// watchesEnded returns the door's count of watches ended for reason.
func (rig *watchRig) watchesEnded(t *testing.T, reason string) int {
	t.Helper()
	mfs, err := rig.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "podsapi_kube_api_watches_ended_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return int(m.GetCounter().GetValue())
				}
			}
		}
	}
	return 0
}

// config returns the client-go configuration of the reader through the
// door, named agent, speaking HTTP/1.1 only when http1 is set.
func (rig *watchRig) config(agent string, http1 bool) *rest.Config {
	cfg := &rest.Config{
		Host:            "https://" + rig.s.addr,
		BearerToken:     rig.cp.Token(nsReader),
		TLSClientConfig: rest.TLSClientConfig{CAData: rig.s.ca},
		UserAgent:       agent,
		QPS:             100,
		Burst:           200,
	}
	if http1 {
		cfg.NextProtos = []string{"http/1.1"}
	}
	return cfg
}

// counts are the calls of an informer's event handler, and the watch
// errors client-go reported.
type counts struct {
	mu                     sync.Mutex
	adds, updates, deletes int
	watchErrors            []string
	lastUpdate             string
}

func (c *counts) get() (adds, updates, deletes int, errs []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.adds, c.updates, c.deletes, append([]string(nil), c.watchErrors...)
}

// informer is a real client-go informer of the pods of namespace "a" on the
// node, through the door.
type informer struct {
	agent  string
	counts *counts
	store  cache.Store
}

// startInformer starts an informer with cfg, waits until it has synced and
// stops it at the end of the test.
func startInformer(t *testing.T, cfg *rest.Config) *informer {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(nsAllowed),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = pinned
			o.LabelSelector = "big!=yes" // not the stalled client's pod, which they need not read
		}))
	inf := f.Core().V1().Pods().Informer()
	c := &counts{}
	if err := inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		c.mu.Lock()
		c.watchErrors = append(c.watchErrors, err.Error())
		c.mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.mu.Lock(); c.adds++; c.mu.Unlock() },
		UpdateFunc: func(_, n any) {
			c.mu.Lock()
			c.updates++
			c.lastUpdate = n.(*corev1.Pod).Name
			c.mu.Unlock()
		},
		DeleteFunc: func(any) { c.mu.Lock(); c.deletes++; c.mu.Unlock() },
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		f.Shutdown()
	})
	if !cache.WaitForCacheSync(t.Context().Done(), inf.HasSynced) {
		t.Fatalf("informer %s did not sync", cfg.UserAgent)
	}
	return &informer{agent: cfg.UserAgent, counts: c, store: inf.GetStore()}
}

// oneWatch fails the test unless the informer sent a single watch (and at
// most one list, as client-go's list-then-watch does) over proto.
func oneWatch(t *testing.T, rig *watchRig, agent, proto string) {
	t.Helper()
	got := rig.requestsOf(agent)
	if got[proto+" watch"] != 1 || got[proto+" list"] > 1 || len(got) > 2 {
		t.Errorf("%s sent %v; want one watch (and at most one list) over %s", agent, got, proto)
	}
}

// TestDoorAPIServerWatchesLast keeps a client-go informer over HTTP/2 and
// one over HTTP/1.1 idle through the door for longer than every timer of
// the door, on the real clock: each stays on its single watch, with no
// error, no relist and no event, then sees the change made after. A client
// that stops reading is ended, and the idle ones are not.
func TestDoorAPIServerWatchesLast(t *testing.T) {
	rig := newWatchRig(t, 3)
	protos := map[string]string{"informer-h2": "HTTP/2.0", "informer-h1": "HTTP/1.1"}
	var infs []*informer
	for _, agent := range []string{"informer-h2", "informer-h1"} {
		infs = append(infs, startInformer(t, rig.config(agent, agent == "informer-h1")))
	}
	time.Sleep(idleFor) // the idle period itself is what is tested, not a synchronisation
	for _, inf := range infs {
		adds, updates, deletes, errs := inf.counts.get()
		if adds != 3 || updates != 0 || deletes != 0 || len(errs) != 0 {
			t.Errorf("%s after %v idle: %d adds, %d updates, %d deletes, watch errors %q; want 3 adds only", inf.agent, idleFor, adds, updates, deletes, errs)
		}
		oneWatch(t, rig, inf.agent, protos[inf.agent])
	}

	// A change after the idle period arrives on the same watch.
	changed := podstest.Pod(nsAllowed, "pa-1", 1)
	changed.Labels["changed"] = "yes"
	rig.st.Upsert(changed)
	for _, inf := range infs {
		waitUntil(t, inf.agent+"'s update", func() bool { _, u, _, _ := inf.counts.get(); return u == 1 })
	}

	t.Run("a client that stops reading is ended", func(t *testing.T) {
		c := rig.s.client()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet,
			"https://"+rig.s.addr+"/api/v1/namespaces/a/pods?watch=true&fieldSelector="+pinned, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+rig.cp.Token(nsReader))
		req.Header.Set("User-Agent", "stalled")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
			t.Fatalf("watch: %s over %s", resp.Status, resp.Proto)
		}
		// Never read the body: change a big pod until the door ends the
		// watch (HTTP/2's window, 4 MiB in Go's client, fills first).
		deadline, stop := podstest.NearDeadline(t)
		defer stop()
		big := podstest.Pod(nsAllowed, "big", 99)
		big.Labels["big"] = "yes"
		big.Annotations["padding"] = strings.Repeat("x", 64<<10)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; rig.watchesEnded(t, "stalled") == 0; i++ {
			select {
			case <-deadline:
				t.Fatalf("the watch of a client that does not read is still served after %d changes", i)
			case <-tick.C: // a steady pace; the loop ends on the count, not the time
			}
			big.Labels["n"] = fmt.Sprint(i)
			rig.st.Upsert(big)
		}
		// The body ends in error once what was buffered is read.
		if _, err := io.Copy(io.Discard, resp.Body); err == nil {
			t.Error("the stalled watch's body ended cleanly; want a reset stream")
		}
	})

	// The idle informers, which select no big pod, are still on their watch.
	for _, inf := range infs {
		_, _, _, errs := inf.counts.get()
		if len(errs) != 0 {
			t.Errorf("%s: watch errors %q", inf.agent, errs)
		}
		oneWatch(t, rig, inf.agent, protos[inf.agent])
	}
	for _, reason := range []string{"behind", "failed", "timeout", "expired"} {
		if n := rig.watchesEnded(t, reason); n != 0 {
			t.Errorf("%d watches ended %s", n, reason)
		}
	}
}

// TestDoorAPIServerKubectlWatch runs an unchanged `kubectl get pods -w`
// through the door over HTTPS (HTTP/2), idle for longer than every timer
// of the door: it keeps running on its one watch, prints no error, and
// prints a pod added after the idle period.
func TestDoorAPIServerKubectlWatch(t *testing.T) {
	bin := kubectlBin(t)
	rig := newWatchRig(t, 1)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	ca := filepath.Join(filepath.Dir(kc), "ca.crt")
	if err := os.WriteFile(ca, rig.s.ca, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: door\n  cluster:\n    server: https://" + rig.s.addr +
		"\n    certificate-authority: " + ca + "\nusers:\n- name: reader\n  user:\n    token: " + rig.cp.Token(nsReader) +
		"\ncontexts:\n- name: door\n  context: {cluster: door, user: reader}\ncurrent-context: door\n"
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--kubeconfig", kc, "--cache-dir", t.TempDir(),
		"get", "pods", "-n", nsAllowed, "-w", "--field-selector", pinned, "-o", "name")
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	defer func() {
		cancel()
		for range lines {
		}
		<-exited
	}()
	deadline, stop := podstest.NearDeadline(t)
	defer stop()
	next := func(want string) {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("kubectl get -w ended; want %q; stderr:\n%s", want, stderr.String())
			}
			if l != want {
				t.Fatalf("kubectl get -w printed %q, want %q", l, want)
			}
		case <-deadline:
			t.Fatalf("kubectl get -w: no %q", want)
		}
	}
	next("pod/pa-0")
	idle := time.NewTimer(idleFor)
	defer idle.Stop()
	select {
	case l, ok := <-lines:
		t.Fatalf("kubectl get -w printed %q (open: %v) while idle; stderr:\n%s", l, ok, stderr.String())
	case <-idle.C: // idle past every timer of the door
	}
	rig.st.Upsert(podstest.Pod(nsAllowed, "pa-new", 7))
	next("pod/pa-new")
	rig.mu.Lock()
	var agent string
	for a := range rig.requests {
		if strings.HasPrefix(a, "kubectl") {
			agent = a
		}
	}
	rig.mu.Unlock()
	if got := rig.requestsOf(agent); got["HTTP/2.0 watch"] != 1 {
		t.Errorf("kubectl (%q) sent %v; want one watch over HTTP/2", agent, got)
	}
	if stderr.Len() != 0 {
		t.Errorf("kubectl get -w wrote to stderr:\n%s", stderr.String())
	}
}

// lockedBuffer is a bytes.Buffer written by one goroutine and read by
// another.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *lockedBuffer) Len() int { return len(b.String()) }

// kubectlBin returns the kubectl beside the kube-apiserver of
// PODSAPI_KUBE_BIN, or skips the test.
func kubectlBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv(kubetest.EnvBin)
	if bin == "" {
		t.Skipf("%s is not set: run `make test-apiserver`", kubetest.EnvBin)
	}
	path := filepath.Join(bin, "kubectl")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no kubectl: %v", err)
	}
	return path
}
