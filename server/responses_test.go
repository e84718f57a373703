package server_test

import (
	"fmt"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/budget"
	"github.com/podsapi/podsapi/errinfo"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestUnreadResponsesBounded: a client that asks for lists and never reads
// them holds each in memory until its connection ends. The responses in
// flight are bounded by half the memory budget, a client's by a quarter of
// that: once a client has a list in flight, another that would take it
// beyond its share is refused RESOURCE_EXHAUSTED MEMORY_BUDGET_EXCEEDED,
// while another client is still answered, and the client is answered again
// once its unread list is gone. Before the bound, 200 unread lists of a
// 10 MB store took a server under 256 MiB to its OOM kill in 2 s (make
// stress, unread lists).
func TestUnreadResponsesBounded(t *testing.T) {
	const attacker = "unit/attacker.service"
	var pods []*corev1.Pod
	for i := range 20 {
		p := podstest.Pod("default", fmt.Sprintf("big-%02d", i), i)
		p.Annotations["padding"] = strings.Repeat("p", 64<<10)
		pods = append(pods, p)
	}
	reg := prometheus.NewRegistry()
	// A budget of 8 MiB: 4 MiB of responses in flight, 1 MiB per client;
	// the list is 1.3 MB.
	f := startStore(t, server.Config{
		Registry: reg,
		Hooks: rootClients(
			"0::/system.slice/attacker.service\n",
			"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0b7e1f6c_1111_4222_8333_444455556666.slice/cri-containerd-0123abcd.scope\n",
			"0::/system.slice/attacker.service\n",
		),
	}, []store.Option{store.WithBudget(budget.New(8 << 20))}, false, pods...)

	// The attacker's first connection asks for the list and reads only the
	// response's HEADERS: the server has built the list and blocks on the
	// flow-control window (64 KiB) the connection never opens further.
	unread := podstest.DialH2(t, f.socket)
	id := unread.Open(podsv1alpha1connect.PodsListPodsProcedure)
	req, err := proto.Marshal(&podsv1alpha1.PodListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unread.Write(func(fr *http2.Framer) error { return fr.WriteData(id, true, podstest.Envelope(0, req)) }); err != nil {
		t.Fatal(err)
	}
	for {
		fr, err := unread.Fr.ReadFrame()
		if err != nil {
			t.Fatalf("waiting for the response's HEADERS: %v", err)
		}
		if h, ok := fr.(*http2.MetaHeadersFrame); ok && h.StreamID == id {
			break
		}
	}
	if held := podstest.GaugeValue(t, reg, "podsapi_responses_in_flight_bytes"); held < 20*64<<10 {
		t.Fatalf("podsapi_responses_in_flight_bytes = %v with an unread list in flight, want at least %d", held, 20*64<<10)
	}

	victim := podstest.ClientKinds[0].Dial(t, f.socket)
	if _, err := victim.List(ctx(t), nil); err != nil {
		t.Fatalf("another client's ListPods: %v", err)
	}
	again := podstest.ClientKinds[0].Dial(t, f.socket)
	_, err = again.List(ctx(t), nil)
	if podstest.ErrorCode(err) != 8 || podstest.ErrorReason(err) != errinfo.MemoryBudget || !strings.Contains(podstest.ErrorMessage(err), attacker) {
		t.Fatalf("the attacker's second ListPods with a list unread: %v (reason %q), want RESOURCE_EXHAUSTED %s naming %s", err, podstest.ErrorReason(err), errinfo.MemoryBudget, attacker)
	}
	if got := podstest.MetricValue(t, reg, "podsapi_responses_refused_total", nil); got != 1 {
		t.Errorf("podsapi_responses_refused_total = %v, want 1", got)
	}

	// The unread connection ends: its call ends, and what it held is
	// returned.
	unread.Conn.Close()
	f.WaitServed(t, podsv1alpha1connect.PodsListPodsProcedure, 3)
	if held := podstest.GaugeValue(t, reg, "podsapi_responses_in_flight_bytes"); held != 0 {
		t.Errorf("podsapi_responses_in_flight_bytes = %v once no response is in flight, want 0", held)
	}
	if _, err := again.List(ctx(t), nil); err != nil {
		t.Fatalf("the attacker's ListPods once its unread list is gone: %v", err)
	}
}
