package store_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// BenchmarkFind looks a pod up by each key in stores of 1,000 and 10,000
// pods: the cost does not grow with the pods (an index, never a scan).
func BenchmarkFind(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		st := store.New()
		for i := range n {
			st.Upsert(podstest.Pod(fmt.Sprintf("ns-%02d", i%10), fmt.Sprintf("pod-%05d", i), i))
		}
		pod := podstest.Pod("ns-00", fmt.Sprintf("pod-%05d", n/2), n/2)
		id := store.TrimRuntime(pod.Status.ContainerStatuses[0].ContainerID)
		ip := netip.MustParseAddr(pod.Status.PodIP)
		for _, k := range []struct {
			name string
			find func() int
		}{
			{"container-id", func() int { _, ms, _ := st.FindContainer(id, false); return len(ms) }},
			{"container-prefix", func() int { _, ms, _ := st.FindContainer(id[:60], false); return len(ms) }},
			{"ip", func() int { _, ms := st.FindIP(ip, false); return len(ms) }},
			{"pod", func() int { _, ms := st.FindPod(pod.UID, id, false); return len(ms) }},
		} {
			b.Run(fmt.Sprintf("%s/pods=%d", k.name, n), func(b *testing.B) {
				if k.find() == 0 {
					b.Fatal("not found")
				}
				b.ReportAllocs()
				for b.Loop() {
					k.find()
				}
			})
		}
	}
}
