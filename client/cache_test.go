package client_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/client"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/test/podstest"
)

// recorder records the handler calls of a cache as strings such as
// "update default/web-2 1->2", and the errors the cache retried after.
type recorder struct {
	calls chan string
	errs  chan error
}

// newRecorder returns an empty recorder.
func newRecorder() *recorder {
	return &recorder{calls: make(chan string, 1000), errs: make(chan error, 1000)}
}

// register registers handlers on c that record into r, and returns r.
func (r *recorder) register(c *client.Cache) *recorder {
	c.OnAdd(func(p *corev1.Pod) { r.calls <- "add " + key(p) })
	c.OnUpdate(func(old, new *corev1.Pod) {
		r.calls <- fmt.Sprintf("update %s %s->%s", key(new), old.ResourceVersion, new.ResourceVersion)
	})
	c.OnDelete(func(p *corev1.Pod) { r.calls <- "delete " + key(p) })
	return r
}

// onError is the cache's error handler: it never blocks.
func (r *recorder) onError(err error) {
	select {
	case r.errs <- err:
	default:
	}
}

func key(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// expectCalls waits for the next handler calls and checks them.
func (r *recorder) expectCalls(t *testing.T, want ...string) {
	t.Helper()
	for i, w := range want {
		select {
		case got := <-r.calls:
			if got != w {
				t.Fatalf("handler call %d = %q, want %q (all wanted: %q)", i, got, w, want)
			}
		case <-time.After(testTimeout):
			t.Fatalf("no handler call %d within %v, want %q", i, testTimeout, w)
		}
	}
}

// expectError waits until the cache retries after an error matching ok.
func (r *recorder) expectError(t *testing.T, what string, ok func(error) bool) {
	t.Helper()
	timeout := time.After(testTimeout)
	for {
		select {
		case err := <-r.errs:
			if ok(err) {
				return
			}
		case <-timeout:
			t.Fatalf("the cache did not retry after %s within %v", what, testTimeout)
		}
	}
}

// runCache runs cache until the end of the test, and checks that Run then
// returns nil.
func runCache(t *testing.T, cache *client.Cache) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cache.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run = %v, want nil after cancellation", err)
			}
		case <-time.After(testTimeout):
			t.Errorf("Run did not return within %v of cancellation", testTimeout)
		}
	})
}

// withRV returns a copy of pod with the given resourceVersion and phase.
func withRV(pod *corev1.Pod, rv string, phase corev1.PodPhase) *corev1.Pod {
	p := pod.DeepCopy()
	p.ResourceVersion = rv
	p.Status.Phase = phase
	return p
}

// TestCacheSurvivesRestart runs a cache across a server restart, with pods
// added, changed and deleted while it was away, and checks the exact,
// ordered handler calls and the final state.
func TestCacheSurvivesRestart(t *testing.T) {
	pods := samplePods() // default/web-1, default/web-2, kube-system/dns-0
	web1, web2, dns0 := pods[0], pods[1], pods[2]
	socket := podstest.SocketPath(t)
	st1 := newStore(false, pods...)
	srv1 := serve(t, st1, socket)

	c := dial(t, socket)
	rec := newRecorder()
	cache := client.NewCache(c, client.WithBackoff(time.Millisecond, 20*time.Millisecond), client.WithErrorHandler(rec.onError))
	rec.register(cache)
	if cache.HasSynced() {
		t.Fatal("HasSynced before Run")
	}
	runCache(t, cache)
	if err := cache.WaitForSync(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	rec.expectCalls(t, "add default/web-1", "add default/web-2", "add kube-system/dns-0")

	// A live change.
	st1.Upsert(withRV(web2, "2", corev1.PodRunning))
	rec.expectCalls(t, "update default/web-2 1->2")

	// The server goes away: the cache keeps what it knows and retries.
	srv1.stop(t)
	rec.expectError(t, "the shutdown", func(err error) bool { return connect.CodeOf(err) == connect.CodeUnavailable })
	if !cache.HasSynced() || len(cache.List()) != 3 {
		t.Fatalf("while disconnected: HasSynced %v, %d pods; want the 3 pods known", cache.HasSynced(), len(cache.List()))
	}

	// A new server, not synced yet: the cache waits and retries.
	st2 := newStore(true)
	serve(t, st2, socket)
	rec.expectError(t, "FAILED_PRECONDITION", func(err error) bool { return errors.Is(err, client.ErrNotSynced) })

	// While the cache was away: web-1 unchanged, web-2 changed, dns-0
	// deleted, api-0 added.
	api0 := podstest.Pod("default", "api-0", 9)
	st2.Upsert(web1)
	st2.Upsert(withRV(web2, "3", corev1.PodFailed))
	st2.Upsert(api0)
	st2.MarkSynced()
	rec.expectCalls(t, "delete kube-system/dns-0", "add default/api-0", "update default/web-2 2->3")

	// Live events go on, with nothing in between.
	st2.Delete(web1.UID)
	rec.expectCalls(t, "delete default/web-1")

	var names []string
	for _, p := range cache.List() {
		names = append(names, key(p)+"@"+p.ResourceVersion)
	}
	if want := []string{"default/api-0@1", "default/web-2@3"}; !slices.Equal(names, want) {
		t.Fatalf("List = %q, want %q", names, want)
	}
	if p, ok := cache.Get(web2.UID); !ok || p.Status.Phase != corev1.PodFailed {
		t.Fatalf("Get(web-2) = %v, %v; want the Failed version", p, ok)
	}
	if _, ok := cache.Get(dns0.UID); ok {
		t.Fatal("Get(dns-0) found a deleted pod")
	}
	if _, ok := cache.GetByName("default", "web-1"); ok {
		t.Fatal("GetByName(web-1) found a deleted pod")
	}
	if got := cache.ByPodIP(api0.Status.PodIP); len(got) != 1 || got[0].UID != api0.UID {
		t.Fatalf("ByPodIP(%s) = %v, want api-0", api0.Status.PodIP, got)
	}
	if got := cache.ByPodIP(dns0.Status.PodIP); len(got) != 0 {
		t.Fatalf("ByPodIP of a deleted pod = %v", got)
	}
	select {
	case call := <-rec.calls:
		t.Fatalf("unexpected handler call %q", call)
	default:
	}
}

// TestCacheIndexes checks GetByName and ByPodIP, with pods that share an IP
// and a pod whose IP changes.
func TestCacheIndexes(t *testing.T) {
	web := podstest.Pod("default", "web-1", 1)
	hostA := podstest.Pod("kube-system", "proxy-a", 0)
	hostB := podstest.Pod("kube-system", "agent-b", 0)
	for _, p := range []*corev1.Pod{hostA, hostB} {
		p.Spec.HostNetwork = true
		p.Status.PodIP = "192.168.10.21"
		p.Status.PodIPs = []corev1.PodIP{{IP: "192.168.10.21"}, {IP: "fd00::21"}}
	}
	st := newStore(false, web, hostA, hostB)
	c := startClient(t, st, server.Config{})
	cache := client.NewCache(c)
	rec := newRecorder().register(cache)
	runCache(t, cache)
	if err := cache.WaitForSync(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	rec.expectCalls(t, "add default/web-1", "add kube-system/agent-b", "add kube-system/proxy-a")

	tests := []struct {
		name string
		ip   string
		want []string
	}{
		{"PodIP", web.Status.PodIP, []string{"default/web-1"}},
		{"SharedHostIP", "192.168.10.21", []string{"kube-system/agent-b", "kube-system/proxy-a"}},
		{"SecondIP", "fd00::21", []string{"kube-system/agent-b", "kube-system/proxy-a"}},
		{"Unknown", "10.0.0.1", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, p := range cache.ByPodIP(tt.ip) {
				got = append(got, key(p))
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("ByPodIP(%s) = %q, want %q", tt.ip, got, tt.want)
			}
		})
	}
	if p, ok := cache.GetByName("kube-system", "proxy-a"); !ok || p.UID != hostA.UID {
		t.Fatalf("GetByName = %v, %v", p, ok)
	}

	moved := web.DeepCopy()
	moved.ResourceVersion = "2"
	moved.Status.PodIPs = []corev1.PodIP{{IP: "10.244.9.9"}}
	moved.Status.PodIP = "10.244.9.9"
	st.Upsert(moved)
	rec.expectCalls(t, "update default/web-1 1->2")
	if got := cache.ByPodIP(web.Status.PodIP); len(got) != 0 {
		t.Fatalf("the old IP still finds %v", got)
	}
	if got := cache.ByPodIP("10.244.9.9"); len(got) != 1 || got[0].UID != web.UID {
		t.Fatalf("the new IP finds %v", got)
	}
}

// TestCacheFieldMask runs a cache on a field mask.
func TestCacheFieldMask(t *testing.T) {
	pods := samplePods()
	st := newStore(false, pods...)
	c := startClient(t, st, server.Config{})
	cache := client.NewCache(c, client.WithFields("status.podIPs"))
	rec := newRecorder().register(cache)
	runCache(t, cache)
	if err := cache.WaitForSync(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	rec.expectCalls(t, "add default/web-1", "add default/web-2", "add kube-system/dns-0")
	p, ok := cache.GetByName("default", "web-2")
	if !ok {
		t.Fatal("GetByName(web-2) found nothing")
	}
	want := &corev1.Pod{}
	want.Namespace, want.Name, want.UID = "default", "web-2", pods[1].UID
	want.Status.PodIPs = pods[1].Status.PodIPs
	if d := podDiff(p, want); d != "" {
		t.Fatal(d)
	}
	if got := cache.ByPodIP(pods[1].Status.PodIPs[0].IP); len(got) != 1 {
		t.Fatalf("ByPodIP on a mask = %v", got)
	}
	// A change outside the mask wakes nobody; one inside does.
	st.Upsert(withRV(pods[1], "2", corev1.PodFailed))
	moved := pods[1].DeepCopy()
	moved.ResourceVersion = "3"
	moved.Status.PodIPs = []corev1.PodIP{{IP: "10.244.9.9"}}
	st.Upsert(moved)
	rec.expectCalls(t, "update default/web-2 ->")
}

// TestCacheInvalidFieldMask checks that Run returns an error retrying cannot
// fix.
func TestCacheInvalidFieldMask(t *testing.T) {
	c := startClient(t, newStore(false, samplePods()...), server.Config{})
	cache := client.NewCache(c, client.WithFields("status.nope"))
	err := cache.Run(testCtx(t))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("Run = %v, want INVALID_ARGUMENT", err)
	}
}

// TestCacheStops checks that Run returns nil soon after its context is
// cancelled, connected or not, and that WaitForSync honours its context.
func TestCacheStops(t *testing.T) {
	tests := []struct {
		name   string
		server bool
	}{
		{"Connected", true},
		{"NoServer", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			socket := podstest.SocketPath(t)
			if tt.server {
				serve(t, newStore(false, samplePods()...), socket)
			}
			cache := client.NewCache(dial(t, socket), client.WithBackoff(time.Hour, time.Hour))
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- cache.Run(ctx) }()
			if tt.server {
				if err := cache.WaitForSync(testCtx(t)); err != nil {
					t.Fatal(err)
				}
			} else {
				wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
				defer wcancel()
				if err := cache.WaitForSync(wctx); !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("WaitForSync without a server = %v", err)
				}
			}
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Run = %v, want nil", err)
				}
			case <-time.After(testTimeout):
				t.Fatal("Run did not return after cancellation")
			}
		})
	}
}

// TestCacheTerminalError is the pattern of docs/client.md as a user hits it
// with a misspelt field or as a user the server denies: Run stops with the
// error at once, and WaitForSync returns it rather than waiting until its
// context ends; the error handler is not told about it.
func TestCacheTerminalError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    server.Config
		fields []string
		want   error
		code   connect.Code
	}{
		{name: "misspelt field", fields: []string{"spec.nodname"}, code: connect.CodeInvalidArgument},
		{name: "peer denied", cfg: server.Config{Access: server.AccessConfig{AllowedUIDs: []uint32{4242}}},
			want: client.ErrPermissionDenied, code: connect.CodePermissionDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startClient(t, newStore(false, samplePods()...), tc.cfg)
			rec := newRecorder()
			cache := client.NewCache(c, client.WithFields(tc.fields...), client.WithBackoff(time.Millisecond, 20*time.Millisecond), client.WithErrorHandler(rec.onError))
			ctx := testCtx(t)
			done := make(chan error, 1)
			go func() { done <- cache.Run(ctx) }()
			err := cache.WaitForSync(ctx)
			if connect.CodeOf(err) != tc.code || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("WaitForSync = %v, want %v (%v)", err, tc.code, tc.want)
			}
			if runErr := <-done; runErr != err {
				t.Errorf("Run = %v, want the error of WaitForSync, %v", runErr, err)
			}
			if cache.Err() != err {
				t.Errorf("Err = %v, want %v", cache.Err(), err)
			}
			if !client.Terminal(err) {
				t.Errorf("Terminal(%v) = false", err)
			}
			select {
			case e := <-rec.errs:
				t.Errorf("the error handler was told %v, a terminal error", e)
			default:
			}
		})
	}
}

// TestTerminal names the errors a Cache stops on and those it retries.
func TestTerminal(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"invalid argument", connect.NewError(connect.CodeInvalidArgument, errors.New("x")), true},
		{"permission denied", connect.NewError(connect.CodePermissionDenied, errors.New("x")), true},
		{"unauthenticated", connect.NewError(connect.CodeUnauthenticated, errors.New("x")), true},
		{"unavailable", connect.NewError(connect.CodeUnavailable, errors.New("x")), false},
		{"socket refuses this user", connect.NewError(connect.CodeUnavailable, &net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.EACCES)}), true},
		{"socket missing", connect.NewError(connect.CodeUnavailable, &net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.ENOENT)}), false},
		{"not synced", connect.NewError(connect.CodeFailedPrecondition, errors.New("x")), false},
		{"rate limited", connect.NewError(connect.CodeResourceExhausted, errors.New("x")), false},
		{"out of range", connect.NewError(connect.CodeOutOfRange, errors.New("x")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := client.Terminal(tc.err); got != tc.want {
				t.Errorf("Terminal(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// TestCacheSocketPermissionDenied is the cache of a user the socket's file
// permissions refuse (a non-root agent on a root-only socket): Run stops
// and WaitForSync returns the error, EACCES. Root passes every file
// permission, so it runs only as another user.
func TestCacheSocketPermissionDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root connects to any socket whatever its permissions; TestTerminal covers EACCES")
	}
	srv := podstest.Start(t, newStore(false, samplePods()...), server.Config{})
	if err := os.Chmod(srv.SocketPath(), 0); err != nil {
		t.Fatal(err)
	}
	cache := client.NewCache(dial(t, srv.SocketPath()), client.WithBackoff(time.Millisecond, 20*time.Millisecond))
	ctx := testCtx(t)
	go cache.Run(ctx)
	if err := cache.WaitForSync(ctx); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("WaitForSync = %v, want the socket's permission error", err)
	}
}
