package server_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/podsapi/podsapi/client"
	"github.com/podsapi/podsapi/errinfo"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/guard"
	"github.com/podsapi/podsapi/internal/hooks"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestRateLimit spends the burst, then expects RESOURCE_EXHAUSTED from
// ListPods and GetPod while WatchPods still works. The refill rate is so low
// that no token comes back during the test.
func TestRateLimit(t *testing.T) {
	for _, kind := range podstest.ClientKinds {
		t.Run(kind.Name, func(t *testing.T) {
			pods := podstest.SamplePods()
			f := start(t, server.Config{Limits: server.LimitsConfig{QPS: 1e-6, Burst: 3}}, false, pods...)
			c := kind.Dial(t, f.socket)
			uid := string(pods[0].UID)
			for i, call := range []func() error{
				func() error { _, err := c.List(ctx(t), nil); return err },
				func() error { _, err := c.Get(ctx(t), uid, nil); return err },
				func() error { _, err := c.List(ctx(t), nil); return err },
			} {
				if err := call(); err != nil {
					t.Fatalf("call %d within the burst: %v", i, err)
				}
			}
			_, err := c.Get(ctx(t), uid, nil)
			if podstest.ErrorCode(err) != connect.CodeResourceExhausted || !strings.Contains(podstest.ErrorMessage(err), "rate limit") {
				t.Fatalf("GetPod beyond the burst: %v, want ResourceExhausted about the rate limit", err)
			}
			if _, err := c.List(ctx(t), nil); podstest.ErrorCode(err) != connect.CodeResourceExhausted {
				t.Fatalf("ListPods beyond the burst: %v, want ResourceExhausted", err)
			}
			for range 5 {
				w, err := c.Watch(ctx(t), nil)
				if err != nil {
					t.Fatal(err)
				}
				for range len(pods) + 1 {
					podstest.Recv(t, w)
				}
			}
		})
	}
}

// TestReadiness checks that nothing is served before the store syncs, and
// that health follows.
func TestReadiness(t *testing.T) {
	for _, kind := range podstest.ClientKinds {
		t.Run(kind.Name, func(t *testing.T) {
			pods := podstest.SamplePods()
			f := start(t, server.Config{}, true, pods[:2]...)
			c := kind.Dial(t, f.socket)
			health := healthpb.NewHealthClient(podstest.GRPCConn(t, f.socket))

			for name, call := range map[string]func() error{
				"ListPods": func() error { _, err := c.List(ctx(t), nil); return err },
				"GetPod":   func() error { _, err := c.Get(ctx(t), string(pods[0].UID), nil); return err },
				"WatchPods": func() error {
					w, err := c.Watch(ctx(t), nil)
					if err != nil {
						return err
					}
					_, err = w.Recv()
					return err
				},
			} {
				err := call()
				if podstest.ErrorCode(err) != connect.CodeFailedPrecondition || !strings.Contains(podstest.ErrorMessage(err), "not synced") {
					t.Fatalf("%s before sync: %v, want FailedPrecondition saying the sources have not synced", name, err)
				}
			}
			for _, service := range []string{"", "kubelet.pods.v1alpha1.Pods"} {
				resp, err := health.Check(ctx(t), &healthpb.HealthCheckRequest{Service: service})
				if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
					t.Fatalf("health of %q before sync: %v, %v; want NOT_SERVING", service, resp.GetStatus(), err)
				}
			}

			hw, err := health.Watch(ctx(t), &healthpb.HealthCheckRequest{Service: "kubelet.pods.v1alpha1.Pods"})
			if err != nil {
				t.Fatal(err)
			}
			f.store.Upsert(pods[2])
			f.store.MarkSynced()
			for {
				resp, err := hw.Recv()
				if err != nil {
					t.Fatalf("health watch: %v", err)
				}
				if resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
					break
				}
			}
			got, err := c.List(ctx(t), nil)
			if err != nil || len(got) != 3 {
				t.Fatalf("ListPods after sync: %d pods, %v; want 3", len(got), err)
			}
			w, err := c.Watch(ctx(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				podstest.Recv(t, w)
			}
			if ev := podstest.Recv(t, w); ev.GetType() != podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE {
				t.Fatalf("got %v, want INITIAL_SYNC_COMPLETE", ev.GetType())
			}
		})
	}
}

// TestRateLimitDelay checks the tarpit over the socket: a refused call is
// answered RESOURCE_EXHAUSTED no sooner than the delay. That a client whose
// deadline is shorter than the delay still hears RESOURCE_EXHAUSTED before
// it is a matter of the tarpit's clock, tested with synctest in package
// guard (TestTarpitDeadline), where no busy machine can make it late.
func TestRateLimitDelay(t *testing.T) {
	for _, kind := range podstest.ClientKinds {
		t.Run(kind.Name, func(t *testing.T) {
			pods := podstest.SamplePods()
			const delay = 300 * time.Millisecond
			f := start(t, server.Config{Limits: server.LimitsConfig{QPS: 1e-6, Burst: 1, RateLimitDelay: delay}}, false, pods...)
			c := kind.Dial(t, f.socket)
			if _, err := c.List(ctx(t), nil); err != nil {
				t.Fatalf("call within the burst: %v", err)
			}
			began := time.Now()
			_, err := c.Get(ctx(t), string(pods[0].UID), nil)
			if took := time.Since(began); podstest.ErrorCode(err) != connect.CodeResourceExhausted || took < delay {
				t.Fatalf("GetPod beyond the burst: %v after %v, want ResourceExhausted after at least %v", err, took, delay)
			}

		})
	}
}

// TestRateLimitNoDelay: a negative RateLimitDelay refuses at once; the
// answer must not wait for a delay of an hour's worth of tokens.
func TestRateLimitNoDelay(t *testing.T) {
	pods := podstest.SamplePods()
	f := start(t, server.Config{Limits: server.LimitsConfig{QPS: 1e-6, Burst: 1, RateLimitDelay: -1, PerClientQPS: 1e-6, PerClientBurst: 1}}, false, pods...)
	c := podstest.ClientKinds[0].Dial(t, f.socket)
	if _, err := c.List(ctx(t), nil); err != nil {
		t.Fatalf("call within the burst: %v", err)
	}
	for range 20 {
		// Without a deadline: a delay would show as the test's timeout.
		if _, err := c.List(context.Background(), nil); podstest.ErrorCode(err) != connect.CodeResourceExhausted {
			t.Fatalf("ListPods beyond the burst: %v, want ResourceExhausted", err)
		}
	}
}

// TestRateLimitDelayedGauge: a refusal waiting for its answer shows in
// podsapi_rate_limit_delayed until its call ends. The test knows the
// refusal waits when the tarpit first selects on the call's context (an
// interceptor just outside the rate limit hands it a context that tells);
// the tarpit's clock is tested with synctest in package guard.
func TestRateLimitDelayedGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	pods := podstest.SamplePods()
	waiting := make(chan struct{})
	var once sync.Once
	tell := connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if req.Spec().Procedure != podsv1alpha1connect.PodsGetPodProcedure {
				return next(ctx, req)
			}
			return next(doneTells{ctx, func() { once.Do(func() { close(waiting) }) }}, req)
		}
	})
	cfg := server.Config{Registry: reg, Limits: server.LimitsConfig{QPS: 1e-6, Burst: 1, RateLimitDelay: time.Hour}, Hooks: &hooks.Hooks{
		Interceptors: func(chain []guard.Named) []guard.Named {
			i := slices.IndexFunc(chain, func(n guard.Named) bool { return n.Name == guard.NameRateLimit })
			return slices.Insert(chain, i, guard.Named{Name: "tell", Interceptor: tell})
		},
	}}
	f := start(t, cfg, false, pods...)
	c := podstest.ClientKinds[0].Dial(t, f.socket)
	if _, err := c.List(ctx(t), nil); err != nil {
		t.Fatalf("call within the burst: %v", err)
	}
	call, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.Get(call, string(pods[0].UID), nil)
		done <- err
	}()
	<-waiting
	if got := podstest.GaugeValue(t, reg, "podsapi_rate_limit_delayed"); got != 1 {
		t.Fatalf("podsapi_rate_limit_delayed = %v while a refusal waits, want 1", got)
	}
	cancel()
	if err := <-done; podstest.ErrorCode(err) != connect.CodeCanceled {
		t.Fatalf("GetPod cancelled while its refusal waited: %v, want Canceled", err)
	}
	f.WaitServed(t, podsv1alpha1connect.PodsGetPodProcedure, 1)
	if got := podstest.GaugeValue(t, reg, "podsapi_rate_limit_delayed"); got != 0 {
		t.Fatalf("podsapi_rate_limit_delayed = %v once the refused call ended, want 0", got)
	}
}

// doneTells is a context that calls tell when asked for its Done channel.
type doneTells struct {
	context.Context
	tell func()
}

func (c doneTells) Done() <-chan struct{} {
	c.tell()
	return c.Context.Done()
}

// TestFindPodsRateLimited checks that FindPods spends the tokens of the
// rate limit GetPod and ListPods share.
func TestFindPodsRateLimited(t *testing.T) {
	web := podstest.Pod("default", "web", 1)
	f := start(t, server.Config{Limits: server.LimitsConfig{QPS: 0.001, Burst: 2, RateLimitDelay: -1}}, false, web)
	g := podstest.NewGrpcurl(t, f.socket)
	if _, err := g.Call(t, "GetPod", fmt.Sprintf(`{"podUID": %q}`, web.UID)); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Call(t, "FindPods", `{"ip": "`+web.Status.PodIP+`"}`); err != nil {
		t.Fatal(err)
	}
	_, err := g.Call(t, "FindPods", `{"ip": "`+web.Status.PodIP+`"}`)
	if podstest.ErrorCode(err) != connect.CodeResourceExhausted || podstest.ErrorReason(err) != errinfo.RateLimited {
		t.Fatalf("FindPods beyond the shared burst = %v, want RESOURCE_EXHAUSTED, RATE_LIMITED", err)
	}
}

// TestFindWaitRateLimitedAsOneCall checks that a FindPods that waits
// spends one token of the shared rate limit however often the store's
// changes wake it: after it, woken three times, and one more call, the
// burst of 2 is spent.
func TestFindWaitRateLimitedAsOneCall(t *testing.T) {
	st := store.New()
	st.MarkSynced()
	waited := podstest.NewWaited(st)
	srv := podstest.Start(t, waited, server.Config{Limits: server.LimitsConfig{QPS: 0.001, Burst: 2, RateLimitDelay: -1, MaxFindWait: time.Hour}})
	c, err := client.New(srv.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	late := podstest.Pod("default", "late", 1)
	ip := netip.MustParseAddr(late.Status.PodIP)
	type result struct {
		ms  []client.Match
		err error
	}
	done := make(chan result, 1)
	go func() {
		ms, _, err := c.FindPods(t.Context(), client.ByIP(ip), client.WithWait(time.Hour))
		done <- result{ms, err}
	}()
	waited.WaitFor(t, 1)
	for i := range 3 {
		st.Upsert(podstest.Pod("default", fmt.Sprintf("other-%d", i), 10+i))
		waited.WaitFor(t, 1)
	}
	st.Upsert(late)
	near, stop := podstest.NearDeadline(t)
	defer stop()
	select {
	case r := <-done:
		if r.err != nil || len(r.ms) != 1 || r.ms[0].Pod.Name != "late" {
			t.Fatalf("the waiting FindPods = %v, %v", r.ms, r.err)
		}
	case <-near:
		t.Fatal("the waiting FindPods did not answer")
	}
	if _, _, err := c.FindPods(t.Context(), client.ByIP(ip)); err != nil {
		t.Fatalf("the second call of the burst: %v", err)
	}
	_, _, err = c.FindPods(t.Context(), client.ByIP(ip))
	if podstest.ErrorCode(err) != connect.CodeResourceExhausted || podstest.ErrorReason(err) != errinfo.RateLimited {
		t.Fatalf("FindPods beyond the burst = %v, want RESOURCE_EXHAUSTED, RATE_LIMITED", err)
	}
}
