package server_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/errinfo"
	"github.com/podsapi/podsapi/internal/hooks"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/socket"
	"github.com/podsapi/podsapi/test/podstest"
)

// rootClients returns hooks under which every peer is root and the n-th
// connection accepted is the process of PID 1000+n, whose cgroup file is
// cgroups[n-1] (the last one for later connections): clients in distinct
// cgroups whatever user runs the test.
func rootClients(cgroups ...string) *hooks.Hooks {
	var accepted atomic.Int32
	return &hooks.Hooks{
		PeerCred: func(c net.Conn) (socket.Cred, error) {
			cred, err := socket.PeerCred(c)
			cred.UID, cred.GID, cred.Groups = 0, 0, nil
			cred.PID = 1000 + accepted.Add(1)
			return cred, err
		},
		Cgroup: func(_ context.Context, pid int32) (string, error) {
			return cgroups[min(int(pid)-1001, len(cgroups)-1)], nil
		},
	}
}

// TestRootClientsToldApart: two root clients in distinct cgroups (a systemd
// unit and a pod) have shares of their own. The unit holds every watch its
// share allows and spends its rate limit; the pod still opens all of its
// watches and is served its calls, and podsapi_client_watches tells who
// holds what. Before the shares were per client, they were per UID: the pod
// got no watch at all.
func TestRootClientsToldApart(t *testing.T) {
	const share = 4
	const attacker = "unit/attacker.service"
	const victim = "pod/0b7e1f6c-1111-4222-8333-444455556666"
	reg := prometheus.NewRegistry()
	f := start(t, server.Config{
		Registry: reg,
		Limits:   server.LimitsConfig{MaxWatchers: 100, MaxWatchersPerClient: share, PerClientQPS: 1e-9, PerClientBurst: 2},
		Hooks: rootClients(
			"0::/system.slice/attacker.service\n",
			"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0b7e1f6c_1111_4222_8333_444455556666.slice/cri-containerd-0123abcd.scope\n",
		),
	}, false, podstest.SamplePods()...)
	wctx, cancel := context.WithCancel(ctx(t))
	defer cancel()

	// The attacker's connection is accepted first: it holds its share of
	// watches, and spends its calls.
	a := podstest.ClientKinds[0].Dial(t, f.socket)
	for range share {
		w, err := a.Watch(wctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		podstest.Recv(t, w)
	}
	w, err := a.Watch(wctx, nil)
	if err == nil {
		_, err = w.Recv()
	}
	if podstest.ErrorCode(err) != connect.CodeResourceExhausted || podstest.ErrorReason(err) != errinfo.TooManyWatches || !strings.Contains(podstest.ErrorMessage(err), attacker) {
		t.Fatalf("attacker's watch beyond its share: %v, want RESOURCE_EXHAUSTED %s naming %s", err, errinfo.TooManyWatches, attacker)
	}
	for range 2 {
		if _, err := a.List(wctx, nil); err != nil {
			t.Fatalf("attacker's ListPods within its burst: %v", err)
		}
	}
	if _, err := a.List(wctx, nil); podstest.ErrorReason(err) != errinfo.ClientRateLimited {
		t.Fatalf("attacker's ListPods beyond its burst: %v, want %s", err, errinfo.ClientRateLimited)
	}

	// The victim, root too, in a pod: its own share of watches and calls.
	v := podstest.ClientKinds[0].Dial(t, f.socket)
	for i := range share {
		w, err := v.Watch(wctx, nil)
		if err != nil {
			t.Fatalf("victim's watch %d: %v", i, err)
		}
		if ev := podstest.Recv(t, w); ev.GetPod() == nil {
			t.Fatalf("victim's watch %d: %v first, want a pod", i, ev.GetType())
		}
	}
	for i := range 2 {
		if _, err := v.List(wctx, nil); err != nil {
			t.Fatalf("victim's ListPods %d: %v", i, err)
		}
	}

	for client, want := range map[string]float64{attacker: share, victim: share} {
		if got := podstest.MetricValue(t, reg, "podsapi_client_watches", map[string]string{"client": client}); got != want {
			t.Errorf("podsapi_client_watches{client=%q} = %v, want %v", client, got, want)
		}
	}
}

// TestRootClientsPendingShares: a root client in a systemd unit holding
// every call its share of calls waiting for their request allows leaves
// another root client, in a pod, its own share: the pod's calls are served
// while the unit's streams are held (before: the same UID, the pod's calls
// were refused TOO_MANY_PENDING_CALLS for the read timeout).
func TestRootClientsPendingShares(t *testing.T) {
	const limit = 10
	f := start(t, server.Config{
		Limits:    server.LimitsConfig{MaxPendingPerClient: limit},
		Transport: server.TransportConfig{RequestReadTimeout: time.Hour},
		Hooks: rootClients(
			"0::/system.slice/attacker.service\n",
			"0::/kubepods.slice/kubepods-pod0b7e1f6c_1111_4222_8333_444455556666.slice/cri-containerd-0123abcd.scope\n",
		),
	}, false, podstest.SamplePods()...)
	// The attacker's connection is accepted first; one more held stream
	// than its share shows the share is full.
	c := podstest.DialH2(t, f.socket)
	for range limit + 1 {
		c.Open("/grpc.health.v1.Health/Check")
	}
	ends, _ := c.ReadUntil(func(ends map[uint32]podstest.StreamEnd, _, _ bool) bool { return len(ends) == 1 })
	for id, end := range ends {
		if end.Status != strconv.Itoa(int(connect.CodeResourceExhausted)) {
			t.Fatalf("the attacker's held stream %d beyond its share ended %+v, want RESOURCE_EXHAUSTED", id, end)
		}
	}
	v := podstest.ClientKinds[0].Dial(t, f.socket)
	for i := range 3 {
		if _, err := v.List(ctx(t), nil); err != nil {
			t.Fatalf("victim's ListPods %d while the attacker holds its share of waiting calls: %v", i, err)
		}
	}
}
