package service_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/budget"
	"github.com/podsapi/podsapi/errinfo"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/podcgroup"
	"github.com/podsapi/podsapi/service"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// findResult is the outcome of a FindPods call made in the background.
type findResult struct {
	res *connect.Response[podsv1alpha1.PodFindResponse]
	err error
}

// findAsync calls FindPods with req in the background.
func findAsync(ctx context.Context, c podsv1alpha1connect.PodsClient, req *podsv1alpha1.PodFindRequest) <-chan findResult {
	done := make(chan findResult, 1)
	go func() {
		res, err := c.FindPods(ctx, connect.NewRequest(req))
		done <- findResult{res, err}
	}()
	return done
}

// receive returns the result of a call of findAsync.
func receive(t *testing.T, done <-chan findResult) findResult {
	t.Helper()
	near, stop := podstest.NearDeadline(t)
	defer stop()
	select {
	case r := <-done:
		return r
	case <-near:
		t.Fatal("FindPods did not answer")
		return findResult{}
	}
}

// matchNames returns "namespace/name[/container]" of each match of res.
func matchNames(res *connect.Response[podsv1alpha1.PodFindResponse]) string {
	var s []string
	for _, m := range res.Msg.GetMatches() {
		v := m.GetPod().GetMetadata().GetNamespace() + "/" + m.GetPod().GetMetadata().GetName()
		if m.GetContainerName() != "" {
			v += "/" + m.GetContainerName()
		}
		s = append(s, v)
	}
	return strings.Join(s, ", ")
}

// TestFindWaitAnswersOnceKnown waits, by each key, for a pod or a container
// the store does not know when the call begins, and makes it known only
// once the call waits: the call answers with it, long before its bound
// (an hour), whether the pod source or the runtime's facts (NRI) tell it.
func TestFindWaitAnswersOnceKnown(t *testing.T) {
	web, _, _ := findPods()
	webIP := web.Status.PodIP
	sandbox := strings.Repeat("5b", 32)
	rtCID := strings.Repeat("6c", 32)
	rtPod := store.RuntimePod{SandboxID: sandbox, UID: "runtime-uid", Namespace: "default", Name: "starting", IPs: []netip.Addr{netip.MustParseAddr("10.9.8.7")}}
	rtContainer := store.RuntimeContainer{ID: rtCID, SandboxID: sandbox, Name: "app", PID: 103, Cgroup: "/custom/ctr-" + rtCID}
	fromRuntime := func(st *store.Store) {
		st.PutRuntimePod(rtPod)
		st.PutRuntimeContainer(rtContainer)
	}
	fromSource := func(st *store.Store) { st.Upsert(web) }
	for _, tc := range []struct {
		name  string
		req   *podsv1alpha1.PodFindRequest
		known func(*store.Store)
		want  string
	}{
		{"a container ID, from the pod source", &podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_ContainerId{ContainerId: "containerd://" + findCID}}, fromSource, "default/web/app"},
		{"a container ID prefix, from the pod source", &podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_ContainerId{ContainerId: findCID[:12]}}, fromSource, "default/web/app"},
		{"an IP, from the pod source", &podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_Ip{Ip: webIP}}, fromSource, "default/web"},
		{"a PID whose cgroup names the pod, from the pod source", &podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_Pid{Pid: 100}}, fromSource, "default/web/app"},
		{"a cgroup of the pod, from the pod source", &podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_CgroupPath{CgroupPath: podstest.SystemdCgroup(findUID, findCID)}}, fromSource, "default/web/app"},
		{"a container ID, from the runtime", &podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_ContainerId{ContainerId: rtCID}}, fromRuntime, "default/starting/app"},
		{"an IP, from the runtime", &podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_Ip{Ip: "10.9.8.7"}}, fromRuntime, "default/starting"},
		{"a cgroup outside the kubelet's naming, from the runtime", &podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_CgroupPath{CgroupPath: "0::/custom/ctr-" + rtCID}}, fromRuntime, "default/starting/app"},
		{"a PID in no pod's cgroup, from the runtime", &podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_Pid{Pid: 103}}, fromRuntime, "default/starting/app"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := podstest.NewWaited(synced(nil))
			h := newHarnessOf(t, st.Store, st, false, service.WithProcesses(podcgroup.NewReader(hostProc(t))), service.WithFindWait(time.Hour, -1, -1))
			c := podsv1alpha1connect.NewPodsClient(h.http, baseURL)
			tc.req.Wait = durationpb.New(time.Hour)
			done := findAsync(t.Context(), c, tc.req)
			st.WaitFor(t, 1)
			select {
			case r := <-done:
				t.Fatalf("FindPods answered %v, %v before the key was known", r.res, r.err)
			default:
			}
			tc.known(st.Store)
			r := receive(t, done)
			if r.err != nil {
				t.Fatalf("FindPods: %v", r.err)
			}
			if got := matchNames(r.res); got != tc.want {
				t.Errorf("FindPods = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestFindWaitAtOnce checks what does not wait: a key known already, a
// key that can never match (a process that does not exist, an ambiguous
// prefix, a malformed key or wait), and a server that turned waiting off.
func TestFindWaitAtOnce(t *testing.T) {
	web, _, _ := findPods()
	st := podstest.NewWaited(synced(nil, web))
	h := newHarnessOf(t, st.Store, st, false, service.WithProcesses(podcgroup.NewReader(hostProc(t))), service.WithFindWait(time.Hour, -1, -1))
	off := newHarnessOf(t, st.Store, st, false, service.WithFindWait(0, -1, -1))
	hour := durationpb.New(time.Hour)
	for _, tc := range []struct {
		name   string
		h      *harness
		req    *podsv1alpha1.PodFindRequest
		want   string
		code   connect.Code
		reason string
	}{
		{"a key known already", h, &podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_Ip{Ip: web.Status.PodIP}, Wait: hour}, "default/web", 0, ""},
		{"no such process", h, &podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_Pid{Pid: 999999}, Wait: hour}, "", connect.CodeNotFound, errinfo.ProcessNotFound},
		{"a malformed key", h, &podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_Ip{Ip: "10.0"}, Wait: hour}, "", connect.CodeInvalidArgument, errinfo.InvalidFindKey},
		{"a negative wait", h, &podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_Ip{Ip: "10.0.0.1"}, Wait: durationpb.New(-time.Second)}, "", connect.CodeInvalidArgument, errinfo.InvalidFindKey},
		{"an invalid duration", h, &podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_Ip{Ip: "10.0.0.1"}, Wait: &durationpb.Duration{Seconds: 1, Nanos: -1}}, "", connect.CodeInvalidArgument, errinfo.InvalidFindKey},
		{"waiting turned off", off, &podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_Ip{Ip: "10.0.0.1"}, Wait: hour}, "", connect.CodeNotFound, errinfo.NoPodMatches},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := podsv1alpha1connect.NewPodsClient(tc.h.http, baseURL)
			res, err := c.FindPods(t.Context(), connect.NewRequest(tc.req))
			if tc.code != 0 {
				if podstest.ErrorCode(err) != tc.code || podstest.ErrorReason(err) != tc.reason {
					t.Fatalf("FindPods = %v (%s), want %v, %s", err, podstest.ErrorReason(err), tc.code, tc.reason)
				}
			} else if err != nil {
				t.Fatal(err)
			} else if got := matchNames(res); got != tc.want {
				t.Errorf("FindPods = %s, want %s", got, tc.want)
			}
			if st.Told() != 0 {
				t.Errorf("the call waited")
			}
		})
	}
}

// TestFindWaitBound honours the bound on synctest's clock: the call asks
// for 10 s and waits exactly that long; one that asks for an hour is cut to
// the server's cap; a change of another key wakes the call, which looks
// its own key up again and waits on. Both end NOT_FOUND as without a wait.
func TestFindWaitBound(t *testing.T) {
	for _, tc := range []struct {
		name      string
		wait, cap time.Duration
		want      time.Duration
	}{
		{"the request's bound", 10 * time.Second, time.Minute, 10 * time.Second},
		{"the server's cap", time.Hour, 3 * time.Second, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := synced(nil)
				h := service.New(st, service.WithFindWait(tc.cap, -1, -1))
				start := time.Now()
				done := make(chan error, 1)
				go func() {
					_, err := h.FindPods(t.Context(), connect.NewRequest(&podsv1alpha1.PodFindRequest{
						Key: &podsv1alpha1.PodFindRequest_Ip{Ip: "10.0.0.1"}, Wait: durationpb.New(tc.wait),
					}))
					done <- err
				}()
				synctest.Wait()
				// Another pod comes: the call looks again and waits on.
				st.Upsert(podstest.Pod("default", "other", 1))
				synctest.Wait()
				select {
				case err := <-done:
					t.Fatalf("FindPods ended at %v: %v", time.Since(start), err)
				default:
				}
				err := <-done
				if got := time.Since(start); got != tc.want {
					t.Errorf("FindPods waited %v, want %v", got, tc.want)
				}
				var ce *connect.Error
				if !errors.As(err, &ce) || ce.Code() != connect.CodeNotFound || errinfo.Reason(err) != "" && errinfo.Reason(err) != errinfo.NoPodMatches {
					t.Errorf("FindPods = %v, want NOT_FOUND", err)
				}
			})
		})
	}
}

// TestFindWaitBoundRealClock waits 100 ms on the real clock, through the
// transport, for a key nothing makes known: NOT_FOUND, NO_POD_MATCHES,
// after the bound, and the slot is free again.
func TestFindWaitBoundRealClock(t *testing.T) {
	const bound = 100 * time.Millisecond
	st := podstest.NewWaited(synced(nil))
	h := newHarnessOf(t, st.Store, st, false, service.WithFindWait(bound, 1, 1))
	c := podsv1alpha1connect.NewPodsClient(h.http, baseURL)
	for range 2 {
		start := time.Now()
		_, err := c.FindPods(t.Context(), connect.NewRequest(&podsv1alpha1.PodFindRequest{
			Key: &podsv1alpha1.PodFindRequest_ContainerId{ContainerId: strings.Repeat("ab", 32)}, Wait: durationpb.New(time.Hour),
		}))
		if podstest.ErrorCode(err) != connect.CodeNotFound || podstest.ErrorReason(err) != errinfo.NoPodMatches {
			t.Fatalf("FindPods = %v (%s), want NOT_FOUND, NO_POD_MATCHES", err, podstest.ErrorReason(err))
		}
		if d := time.Since(start); d < bound {
			t.Errorf("FindPods answered after %v, before its bound %v", d, bound)
		}
	}
}

// TestFindWaitersBounded fills the bounds of the calls waiting, per
// client and in all: the next call fails RESOURCE_EXHAUSTED,
// TOO_MANY_FIND_WAITERS, and a cancelled call frees its slot for another.
func TestFindWaitersBounded(t *testing.T) {
	for _, tc := range []struct {
		name             string
		total, perClient int
		client           string
	}{
		{"per client", 10, 2, "agent"},
		{"share follows the total", 4, 10, "agent"},
		{"in all", 2, 10, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := podstest.NewWaited(synced(nil))
			b := budget.New(64 << 20)
			// One client; in all, a client per call.
			var calls atomic.Int64
			client := func(context.Context) string {
				if tc.client == "" {
					return fmt.Sprint("agent-", calls.Add(1))
				}
				return tc.client
			}
			h := newHarnessOf(t, st.Store, st, false, service.WithFindWait(time.Hour, tc.total, tc.perClient), service.WithBudget(b),
				service.WithClient(client))
			c := podsv1alpha1connect.NewPodsClient(h.http, baseURL)
			req := func(i int) *podsv1alpha1.PodFindRequest {
				return &podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_Ip{Ip: fmt.Sprintf("10.1.0.%d", i)}, Wait: durationpb.New(time.Hour)}
			}
			ctx, cancel := context.WithCancel(t.Context())
			first := findAsync(ctx, c, req(1))
			second := findAsync(t.Context(), c, req(2))
			st.WaitFor(t, 2)
			if got := b.Used(budget.Waiters); got != 2*service.FindWaiterBytes {
				t.Errorf("the budget counts %d bytes of waiters, want %d", got, 2*service.FindWaiterBytes)
			}
			_, err := c.FindPods(t.Context(), connect.NewRequest(req(3)))
			if podstest.ErrorCode(err) != connect.CodeResourceExhausted || podstest.ErrorReason(err) != errinfo.TooManyFindWaiters ||
				podstest.ErrorMetadata(err)["limit"] != "2" || podstest.ErrorMetadata(err)["client"] != tc.client {
				t.Fatalf("a third waiting call = %v (%s, %v), want RESOURCE_EXHAUSTED, TOO_MANY_FIND_WAITERS, limit 2, client %q", err, podstest.ErrorReason(err), podstest.ErrorMetadata(err), tc.client)
			}
			cancel()
			if r := receive(t, first); podstest.ErrorCode(r.err) != connect.CodeCanceled {
				t.Fatalf("the cancelled call = %v", r.err)
			}
			// The refused call and the cancelled one are served: the slot
			// is free.
			h.events.WaitServed(t, podsv1alpha1connect.PodsFindPodsProcedure, 2)
			third := findAsync(t.Context(), c, req(3))
			st.WaitFor(t, 1)
			st.Upsert(withIP(podstest.Pod("default", "second", 1), "10.1.0.2"))
			st.Upsert(withIP(podstest.Pod("default", "third", 1), "10.1.0.3"))
			for name, done := range map[string]<-chan findResult{"second": second, "third": third} {
				if r := receive(t, done); r.err != nil || matchNames(r.res) != "default/"+name {
					t.Errorf("the %s call = %v, %v", name, r.res, r.err)
				}
			}
			h.events.WaitServed(t, podsv1alpha1connect.PodsFindPodsProcedure, 4)
			if got := b.Used(budget.Waiters); got != 0 {
				t.Errorf("the budget counts %d bytes of waiters after they ended, want 0", got)
			}
		})
	}
}

// withIP returns pod with ip as its only IP.
func withIP(pod *corev1.Pod, ip string) *corev1.Pod {
	pod.Status.PodIP, pod.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	return pod
}

// TestFindWaitersMemory holds 1,000 waiting calls, over HTTP/2, and
// reports the heap, stacks and goroutines they take, client and server
// together (the harness is in process): each within FindWaiterBytes of
// heap, the estimate of the server's part (heap and stack) the memory
// budget counts, and within 4 goroutines (the server's handler, the
// client's call and the HTTP/2 streams'). A change of the
// store wakes them all, each looking its own key up again, and one of
// them is answered.
func TestFindWaitersMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 calls")
	}
	const n = 1000
	st := podstest.NewWaited(synced(nil))
	h := newHarnessOf(t, st.Store, st, false, service.WithFindWait(time.Hour, n, 0))
	c := podsv1alpha1connect.NewPodsClient(h.http, baseURL)
	// A first call warms the connection up.
	if _, err := c.FindPods(t.Context(), connect.NewRequest(&podsv1alpha1.PodFindRequest{Key: &podsv1alpha1.PodFindRequest_Ip{Ip: "10.2.0.0"}})); podstest.ErrorCode(err) != connect.CodeNotFound {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	goroutines := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	dones := make([]<-chan findResult, n)
	for i := range n {
		dones[i] = findAsync(ctx, c, &podsv1alpha1.PodFindRequest{
			Key: &podsv1alpha1.PodFindRequest_Ip{Ip: fmt.Sprintf("10.2.%d.%d", i/250, 1+i%250)}, Wait: durationpb.New(time.Hour),
		})
	}
	st.WaitFor(t, n)
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	stacks := int64(after.StackInuse) - int64(before.StackInuse)
	perCall := (heap + stacks) / n
	g := runtime.NumGoroutine() - goroutines
	t.Logf("%d waiting FindPods calls, client and server: %d bytes of heap and %d of stacks (%d per call), %d goroutines (%.1f per call)", n, heap, stacks, perCall, g, float64(g)/n)
	// The server's part is about half of it: the client's call and
	// HTTP/2 stream mirror the server's. The stacks double under -race.
	if heap/n > service.FindWaiterBytes {
		t.Errorf("a waiting call takes %d bytes of heap, client and server, beyond the %d the budget counts for the server's part", heap/n, service.FindWaiterBytes)
	}
	if g > 4*n {
		t.Errorf("%d waiting calls take %d goroutines", n, g)
	}
	st.Upsert(withIP(podstest.Pod("default", "found", 1), "10.2.0.1"))
	if r := receive(t, dones[0]); r.err != nil || matchNames(r.res) != "default/found" {
		t.Fatalf("the first call = %v, %v", r.res, r.err)
	}
	// Every other call woke and waits again.
	st.WaitFor(t, n-1)
	cancel()
	for _, done := range dones[1:] {
		if r := receive(t, done); podstest.ErrorCode(r.err) != connect.CodeCanceled {
			t.Fatalf("a cancelled call = %v", r.err)
		}
	}
}
