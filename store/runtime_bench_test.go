package store_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// BenchmarkUpsertRuntimeFacts updates a pod in a store of 1,000 pods,
// without runtime facts and with those of every pod and its containers (as
// NRI gives them) and a report-delay observer: the cost of a pod source's
// update must not grow with the runtime facts the store holds (a lookup
// per container of the pod, never a scan). The updates alternate between
// the pod's status without its container IDs and with them, as when the
// kubelet first reports its containers, so that each one moves the pod's
// index keys and looks its containers up among the runtime's.
func BenchmarkUpsertRuntimeFacts(b *testing.B) {
	const n = 1000
	for _, facts := range []bool{false, true} {
		b.Run("facts="+strconv.FormatBool(facts), func(b *testing.B) {
			st := store.New()
			var observed int
			st.ObserveReports(func(time.Duration) { observed++ })
			pods := make([][2]*corev1.Pod, n)
			for i := range n {
				p := podstest.Pod(fmt.Sprintf("ns-%02d", i%10), fmt.Sprintf("pod-%05d", i), i)
				early := p.DeepCopy()
				for j := range early.Status.ContainerStatuses {
					early.Status.ContainerStatuses[j].ContainerID = ""
				}
				pods[i] = [2]*corev1.Pod{early, p}
				if !facts {
					continue
				}
				sandbox := fmt.Sprintf("%064x", i)
				if !st.PutRuntimePod(store.RuntimePod{SandboxID: sandbox, UID: p.UID, Namespace: p.Namespace, Name: p.Name}) {
					b.Fatal("runtime pod refused")
				}
				for _, c := range p.Status.ContainerStatuses {
					if !st.PutRuntimeContainer(store.RuntimeContainer{ID: store.TrimRuntime(c.ContainerID), SandboxID: sandbox, Name: c.Name, PID: uint32(1000 + i)}) {
						b.Fatal("runtime container refused")
					}
				}
			}
			for _, p := range pods {
				st.Upsert(p[1])
			}
			if _, containers, _ := st.RuntimeLen(); facts && (containers == 0 || observed != containers) {
				b.Fatalf("%d runtime containers, %d report delays observed", containers, observed)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				st.Upsert(pods[i%n][(i/n)%2])
			}
		})
	}
}
