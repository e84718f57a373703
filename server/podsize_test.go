package server_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestOversizedPodRefused: a source sending a pod over the store's bound
// (issue 25: a 100 MiB pod was served, and every client with a 4 MiB
// receive limit failed ListPods) leaves it out of what clients see, and
// podsapi_pods_too_large_total counts it.
func TestOversizedPodRefused(t *testing.T) {
	reg := prometheus.NewRegistry()
	pods := podstest.SamplePods()
	f := start(t, server.Config{Registry: reg}, false, pods...)
	big := pods[0].DeepCopy()
	big.Name, big.UID = "big", "uid-big"
	big.Annotations = map[string]string{"big": strings.Repeat("x", store.DefaultMaxPodBytes)}
	f.store.Upsert(big)
	for _, c := range podstest.ClientKinds {
		got, err := c.Dial(t, f.socket).List(ctx(t), nil)
		if err != nil {
			t.Fatalf("%s: ListPods: %v", c.Name, err)
		}
		if len(got) != len(pods) {
			t.Fatalf("%s: ListPods returned %d pods, want the %d others", c.Name, len(got), len(pods))
		}
	}
	if got := podstest.MetricValue(t, reg, "podsapi_pods_too_large_total", nil); got != 1 {
		t.Fatalf("podsapi_pods_too_large_total = %v, want 1", got)
	}
}
