package bench_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/client"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// findWaitTrials is how many containers each way of asking looks up.
const findWaitTrials = 40

// findWaitWay is a way an agent asks for the pod of a container it saw
// before podsapi knew it: one FindPods that waits, or a loop of FindPods
// every interval until one finds it.
type findWaitWay struct {
	name     string
	interval time.Duration // 0: one call with a wait
}

// TestFindWaitAgainstPolling measures, against a real server on a UNIX
// socket and the real Go client, the delay between the moment a container
// becomes known (the pod source's report, stored) and the moment an agent
// that was already looking for it has its answer, and the calls it made:
// with one FindPods that waits, and with a loop that calls FindPods every
// 500 ms and every 50 ms, as agents do today. The container becomes known
// at offsets spread evenly over a second after the agent starts looking,
// the same offsets for each way. It runs only with PODSAPI_BENCH_FINDWAIT,
// the Markdown file it writes (make bench-findwait), which make bench
// copies into docs/benchmarks.md.
func TestFindWaitAgainstPolling(t *testing.T) {
	out := os.Getenv("PODSAPI_BENCH_FINDWAIT")
	if out == "" {
		t.Skip("make bench-findwait: set PODSAPI_BENCH_FINDWAIT to the Markdown file to write")
	}
	st := store.New()
	for i := range 100 {
		st.Upsert(podstest.Pod("bench", fmt.Sprintf("pod-%d", i), i))
	}
	st.MarkSynced()
	srv := podstest.Start(t, st, server.Config{})
	c, err := client.New(srv.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	ways := []findWaitWay{{"one FindPods with a wait of 5 s", 0}, {"FindPods every 500 ms", 500 * time.Millisecond}, {"FindPods every 50 ms", 50 * time.Millisecond}}
	var rows []string
	for wi, way := range ways {
		var delays []time.Duration
		calls := 0
		for i := range findWaitTrials {
			// Offsets from 0 to 975 ms, the same for each way.
			offset := time.Duration(i) * time.Second / findWaitTrials
			pod := podstest.Pod("late", fmt.Sprintf("late-%d-%d", wi, i), 1000+wi*findWaitTrials+i)
			d, n := findWaitTrial(t, c, st, way, pod, offset)
			delays = append(delays, d)
			calls += n
		}
		slices.Sort(delays)
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %.1f |", way.name,
			ms(delays[len(delays)/2]), ms(delays[len(delays)*9/10]), ms(delays[len(delays)-1]), ms(mean(delays)), float64(calls)/findWaitTrials))
		t.Logf("%s: median %v, p90 %v, max %v, %.1f calls per lookup", way.name, delays[len(delays)/2], delays[len(delays)*9/10], delays[len(delays)-1], float64(calls)/findWaitTrials)
	}
	md := fmt.Sprintf(`## FindPods that waits, against polling (issue 42)

Written by `+"`make bench-findwait`"+` (`+"`TestFindWaitAgainstPolling`"+` in test/bench), not by `+"`make bench`"+`, which
copies it here: a real server on a UNIX socket holding 100 pods, and the real Go client in the same process. For each way of
asking, %d containers become known (the pod source's report of a new pod, stored) at offsets spread evenly over the second
after the agent starts looking for the container's ID, the same offsets for each way; the delay is from the moment the
store is asked to take the pod to the moment the agent has its answer. An agent that polls finds the container at its next call, up to
an interval late, and pays a call per interval before; one FindPods with a wait is answered when the store takes the pod.
%s, %d CPUs, %s, %s.

| way of asking | median delay | p90 | max | mean | FindPods calls per lookup |
|---|---|---|---|---|---|
%s

A waiting call costs its handler's goroutine and no more: 1,000 calls waiting at once took about 23 KB of heap and 3
goroutines each, client and server together, and 21 KB (41 KB under -race) of stacks (`+"`go test -run TestFindWaitersMemory -v ./service`"+`,
which asserts at most 32 KiB of heap a call, the estimate the memory budget counts for each, `+"`kind=\"waiters\"`"+`). A change
of the store wakes every waiter, each looking its own key up again in the index.
`, findWaitTrials, time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.Version(), "shared machine", strings.Join(rows, "\n"))
	if err := os.WriteFile(out, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
}

// findWaitTrial has an agent look for the first container of pod, which
// the store takes offset after the agent starts, and returns the delay
// from then to the agent's answer and the calls the agent made.
func findWaitTrial(t *testing.T, c *client.Client, st *store.Store, way findWaitWay, pod *corev1.Pod, offset time.Duration) (time.Duration, int) {
	key := client.ByContainerID(pod.Status.ContainerStatuses[0].ContainerID)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	type answer struct {
		at    time.Time
		calls int
		err   error
	}
	done := make(chan answer, 1)
	go func() {
		calls := 0
		for {
			calls++
			var opts []client.CallOption
			if way.interval == 0 {
				opts = append(opts, client.WithWait(5*time.Second))
			}
			_, _, err := c.FindPods(ctx, key, opts...)
			if err == nil || !errors.Is(err, client.ErrNotFound) {
				done <- answer{time.Now(), calls, err}
				return
			}
			if way.interval > 0 {
				select {
				case <-time.After(way.interval):
				case <-ctx.Done():
					done <- answer{time.Now(), calls, ctx.Err()}
					return
				}
			}
		}
	}()
	time.Sleep(offset)
	// The store holds the pod from some moment within Upsert: the delay
	// is counted from its start.
	known := time.Now()
	st.Upsert(pod)
	a := <-done
	if a.err != nil {
		t.Fatalf("%s: %v", way.name, a.err)
	}
	return max(a.at.Sub(known), 0), a.calls
}

// ms formats d in milliseconds.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// mean returns the mean of ds.
func mean(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(cmp.Or(len(ds), 1))
}
