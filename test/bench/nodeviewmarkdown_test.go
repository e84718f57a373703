package bench

import (
	"strings"
	"testing"
	"time"
)

// TestNodeViewMarkdown checks the writer's arithmetic on figures made up
// for it: ratios to the direct feed of the same measurement, per change and
// per agent, and a section left out when it was not measured.
func TestNodeViewMarkdown(t *testing.T) {
	one := []viewResult{
		{feed: feedDirect, nodes: 1, agents: 10, watches: map[string]float64{"pods": 10, "namespaces": 10, "replicasets": 10, "nodes": 10},
			lists: 40, syncBytes: 3000, churnBytes: 1000, agentChurnBytes: 1000, updates: 100, rsEvents: 1000, cpu: 4, sync: time.Second},
		{feed: feedNodeView, nodes: 1, agents: 10, watches: map[string]float64{"pods": 1, "namespaces": 1, "nodes": 1, "services": 0},
			lists: 3, gets: 74, reviews: 9, syncBytes: 40, updates: 100, cpu: 1, sync: 2 * time.Second, serving: 500 * time.Millisecond, serverRSS: 40 << 20, serverCPU: 0.5},
	}
	informer := []informerResult{
		{feed: feedDirect, objects: 50000, heap: 64 << 20, bytes: 1 << 20, sync: time.Second},
		{feed: feedNodeView, objects: 50, heap: 64 << 10, bytes: 1 << 10, sync: 3 * time.Second, serverRSS: 40 << 20},
	}
	got := nodeViewMarkdown(nodeViewResults{start: time.Now(), oneNode: one, informer: informer})
	for _, want := range []string{
		"| direct | 10 | 10 | 10 | 10 | 10 | 40 | 40 | 0 | 0 | 2.9 KiB | 1000 B | 4.00 s | 1s |  |  |  |",
		"| node view | 10 | 1 | 1 | 0 | 1 | 3 | 3 | 74 | 9 | 40 B | 0 B | 1.00 s | 2s | 500ms | 40.0 MiB | 0.50 s |",
		"| node view | 0.075 | 0.075 | 0.01 | 0.25 |",              // Watches, lists, bytes (sync and churn), CPU.
		"| direct | 100 | 1000 | 1000 B | 10 B | 1000 B | 100 B |", // Per change, per agent.
		"| node view | 0 | 0 |",                                         // The churn's bytes.
		"| node view | 50 | 3s | 64.0 KiB | 1.0 KiB | 40.0 MiB |",       // The informer.
		"objects 0.001, heap 0.000977, bytes 0.000977, time to sync 3.", // Its ratios.
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the markdown lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "The fleet") {
		t.Errorf("the markdown has a fleet section without a fleet measured:\n%s", got)
	}
}
