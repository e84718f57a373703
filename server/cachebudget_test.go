package server_test

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/budget"
	"github.com/podsapi/podsapi/fieldmask"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestCachesWithinBudget is issue 25's finding 3, scaled down: ListPods
// with 32 distinct field masks, each keeping the pods' large annotations,
// made the view and list caches keep about 48 copies of the store (here 100
// pods of 20 KB: 96 MiB). With a memory budget of 8 MiB they keep at most
// the budget, every list is still answered whole, and the gauges say so.
func TestCachesWithinBudget(t *testing.T) {
	const (
		pods         = 100
		memoryBudget = 8 << 20
	)
	var initial []*corev1.Pod
	for k := range pods {
		p := podstest.Pod("big", fmt.Sprintf("p%03d", k), k)
		p.Annotations = map[string]string{"pad": strings.Repeat("x", 20<<10)}
		initial = append(initial, p)
	}
	reg := prometheus.NewRegistry()
	f := startWith(t, server.Config{Registry: reg, Limits: server.LimitsConfig{QPS: -1}}, []store.Option{store.WithBudget(budget.New(memoryBudget))}, initial...)
	c := podstest.ClientKinds[0].Dial(t, f.socket)
	fields := []string{"metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels", "spec.nodeName"}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	for set := range 1 << len(fields) {
		paths := []string{"metadata.annotations"}
		for i, p := range fields {
			if set&(1<<i) != 0 {
				paths = append(paths, p)
			}
		}
		h := http.Header{}
		h.Set(fieldmask.Header, strings.Join(paths, ","))
		resp, err := c.ListReq(ctx(t), &podsv1alpha1.PodListRequest{}, h)
		if err != nil {
			t.Fatalf("mask %v: %v", paths, err)
		}
		if got := len(resp.GetPods()); got != pods || len(resp.GetPods()[0].GetMetadata().GetAnnotations()["pad"]) != 20<<10 {
			t.Fatalf("mask %v: %d pods, want %d whole annotations", paths, got, pods)
		}
	}
	grown := int64(heap()) - int64(before)
	views := podstest.MetricValue(t, reg, "podsapi_memory_used_bytes", map[string]string{"kind": "views"})
	lists := podstest.MetricValue(t, reg, "podsapi_memory_used_bytes", map[string]string{"kind": "lists"})
	t.Logf("heap grew %.1f MiB; views %.1f MiB, lists %.1f MiB counted", float64(grown)/(1<<20), views/(1<<20), lists/(1<<20))
	if views+lists > memoryBudget {
		t.Errorf("views and lists count %v bytes, over the memoryBudget of %d", views+lists, memoryBudget)
	}
	if views == 0 || lists == 0 {
		t.Errorf("views %v, lists %v bytes counted: the caches kept nothing", views, lists)
	}
	// The caches held 96 MiB before the memoryBudget; allow the client's
	// connection and garbage the collector has not returned.
	if limit := int64(3 * memoryBudget); grown > limit {
		t.Errorf("the heap grew by %d bytes after 32 masked lists, over %d: the caches are not bounded by the memoryBudget", grown, limit)
	}
	if v := podstest.GaugeValue(t, reg, "podsapi_memory_budget_bytes"); v != memoryBudget {
		t.Errorf("podsapi_memory_budget_bytes = %v, want %d", v, memoryBudget)
	}
}
