package nri_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"

	"github.com/podsapi/podsapi/client"
)

// eventGap is the time between two events of BenchmarkCreateToFind's
// paced events: about a node's, where a pod's sandbox, create and start
// events come some 100 ms apart.
const eventGap = 50 * time.Millisecond

// BenchmarkCreateToFind measures how long after the runtime's
// post-create event of a container FindPods (through the real client, on
// the socket) finds it by its ID, the runtime side being NRI's own; and,
// as a baseline in the same run, one FindPods of a container already
// known. It reports the bytes the facts of each container (and its share
// of the pod's) cost the store.
func BenchmarkCreateToFind(b *testing.B) {
	socket := nriSocket(b)
	rt := startRuntime(b, socket, nil, nil)
	p := startPodsapi(b, socket, b.TempDir(), nil)
	rt.waitSynced(b)
	ctx := b.Context()
	pod := newTestPod(7)
	s := pod.sandbox()
	known := containerID(1 << 40)
	if err := rt.PostCreateContainer(ctx, &adaptation.PostCreateContainerRequest{Pod: s, Container: pod.container(known, "known", 0)}); err != nil {
		b.Fatal(err)
	}
	b.Run("event to found", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			id := containerID(i)
			if err := rt.PostCreateContainer(ctx, &adaptation.PostCreateContainerRequest{Pod: s, Container: pod.container(id, "app", 0)}); err != nil {
				b.Fatal(err)
			}
			if _, _, err := p.client.FindPods(ctx, client.ByContainerID(id)); err != nil {
				b.Fatalf("container %d not found right after its event: %v", i, err)
			}
		}
		_, containers, bytes := p.st.RuntimeLen()
		b.ReportMetric(float64(bytes)/float64(containers), "bytes/container")
	})
	b.Run("events alone", func(b *testing.B) {
		// The process's CPU time per thousand events: podsapi's and the
		// runtime side's together (both run in this process), an upper
		// bound of podsapi's.
		var r0, r1 syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
		i := 1 << 20
		for b.Loop() {
			i++
			if err := rt.PostCreateContainer(ctx, &adaptation.PostCreateContainerRequest{Pod: s, Container: pod.container(containerID(i), "app", 0)}); err != nil {
				b.Fatal(err)
			}
		}
		syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
		cpu := time.Duration(r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano())
		b.ReportMetric(float64(cpu.Milliseconds())*1000/float64(b.N), "cpu-ms/1000-events")
	})
	b.Run("events paced", func(b *testing.B) {
		// The same, one event every eventGap: on a node the runtime's
		// events come apart (a few a second), and the process idles
		// between them, so that each event wakes its threads again.
		// The CPU per event is then that of the wake-ups besides the
		// work: the figure to compare with a node's.
		var r0, r1 syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
		i := 1 << 30
		for b.Loop() {
			i++
			if err := rt.PostCreateContainer(ctx, &adaptation.PostCreateContainerRequest{Pod: s, Container: pod.container(containerID(i), "app", 0)}); err != nil {
				b.Fatal(err)
			}
			time.Sleep(eventGap)
		}
		syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
		cpu := time.Duration(r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano())
		b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-ms/1000-events")
	})
	b.Run("idle", func(b *testing.B) {
		// The baseline of the paced events: the same gaps, no event.
		var r0, r1 syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
		for b.Loop() {
			time.Sleep(eventGap)
		}
		syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
		cpu := time.Duration(r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano())
		b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-ms/1000-events")
	})
	b.Run("FindPods alone", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := p.client.FindPods(ctx, client.ByContainerID(known)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
