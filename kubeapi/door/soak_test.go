package door_test

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/childproc"
	"github.com/podsapi/podsapi/test/podstest"
)

// The soak's knobs: make soak-door sets them for the run published in
// docs/benchmarks.md; CI runs the short default.
const (
	envSoakDuration  = "PODSAPI_SOAK_DOOR"           // how long the churn lasts (default 10s)
	envSoakInformers = "PODSAPI_SOAK_DOOR_INFORMERS" // how many informers (default 20)
	soakPods         = 10                            // pods held when the informers start
	soakEvery        = 50 * time.Millisecond         // one change every soakEvery
	// The soak is of churn, not of idle timers (TestDoorAPIServerWatchesLast
	// has those): the write timeout is long enough that 20 informers in the
	// test's own process, on a busy 2-core machine, never miss it (at 500
	// ms, a few did while other tests ran beside it), and bookmarks
	// come often.
	soakWrite    = 10 * time.Second
	soakBookmark = 2 * time.Second
	// The growth allowed from the start of the churn to its end: what the
	// runtime's and the allocator's noise may take, far below one more
	// goroutine or buffer per change (the churn makes hundreds to
	// thousands of changes, times the informers).
	// The race detector's shadow memory grows with every address touched:
	// its RSS is not checked.
	soakGoroutineSlack = 10
	soakHeapSlack      = 8 << 20
	soakRSSSlack       = 16 << 20
)

// soakKnobs returns the soak's duration and informers.
func soakKnobs(t *testing.T) (time.Duration, int) {
	t.Helper()
	d, n := 10*time.Second, 20
	if v := os.Getenv(envSoakDuration); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a duration", envSoakDuration, v)
		}
	}
	if v := os.Getenv(envSoakInformers); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			t.Fatalf("%s=%q: want a number of informers", envSoakInformers, v)
		}
	}
	return d, n
}

// processFootprint is the process's goroutines, live heap and resident memory,
// after a collection that returns what it frees to the system.
func processFootprint(t *testing.T) (goroutines int, heap, rss int64) {
	t.Helper()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss, err := childproc.RSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	return runtime.NumGoroutine(), int64(ms.HeapAlloc), rss
}

// TestDoorAPIServerSoak keeps N client-go informers (one in four over
// HTTP/1.1, the rest over HTTP/2) on the door while the node's pods
// change at a steady pace (a pod added, one updated, one deleted, in
// turn), on the real clock with the door's timers short: each informer
// stays on one watch, sees exactly the changes made, and the process's
// goroutines and RSS end where they started, within a stated slack.
func TestDoorAPIServerSoak(t *testing.T) {
	dur, n := soakKnobs(t)
	// The store keeps a history of changes (for resumes) and deleted pods
	// (for FindPod), bounded by design: small here, so that they are full
	// before the start is measured and what grows after is the watches'.
	rig := newWatchRigTimers(t, soakPods, soakWrite, soakBookmark, store.WithHistory(32, 1<<20), store.WithDeletedPods(-1, -1, -1))
	infs := make([]*informer, n)
	protos := make([]string, n)
	for i := range infs {
		http1 := i%4 == 3
		protos[i] = "HTTP/2.0"
		if http1 {
			protos[i] = "HTTP/1.1"
		}
		infs[i] = startInformer(t, rig.config(fmt.Sprintf("soak-%d", i), http1))
	}
	// The start is taken after a warm-up of a fifth of the run, when the
	// connections' buffers and the caches have their working size.
	var g0, gMax int
	var heap0, rss0, rssMax int64
	warm := time.NewTimer(dur / 5)
	defer warm.Stop()

	// The churn: added pods live until deleted, oldest first.
	var added, updated, deleted int
	var live []string
	tick := time.NewTicker(soakEvery)
	defer tick.Stop()
	end := time.NewTimer(dur) // the soak's length, not a synchronisation
	defer end.Stop()
	sample := time.NewTicker(max(dur/10, time.Second))
	defer sample.Stop()
	for i, done := 0, false; !done; {
		select {
		case <-end.C:
			done = true
		case <-warm.C:
			g0, heap0, rss0 = processFootprint(t)
			gMax, rssMax = max(gMax, g0), max(rssMax, rss0)
		case <-sample.C:
			g, _, rss := processFootprint(t)
			gMax, rssMax = max(gMax, g), max(rssMax, rss)
		case <-tick.C:
			switch i % 3 {
			case 0:
				name := fmt.Sprintf("churn-%d", i)
				rig.st.Upsert(podstest.Pod(nsAllowed, name, 100+i%1000))
				live = append(live, name)
				added++
			case 1:
				p := podstest.Pod(nsAllowed, fmt.Sprintf("pa-%d", i%soakPods), i%soakPods)
				p.Labels["rev"] = strconv.Itoa(i)
				rig.st.Upsert(p)
				updated++
			case 2:
				if len(live) > 0 {
					rig.st.Delete(podstest.Pod(nsAllowed, live[0], 0).UID)
					live = live[1:]
					deleted++
				}
			}
			i++
		}
	}
	// The informers catch up within a minute (go test's -timeout may be
	// off for a long soak).
	caughtUp := time.NewTimer(time.Minute)
	defer caughtUp.Stop()
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for _, inf := range infs {
		for {
			a, u, d, errs := inf.counts.get()
			if a == soakPods+added && u == updated && d == deleted {
				break
			}
			select {
			case <-caughtUp.C:
				t.Fatalf("%s saw %d adds, %d updates, %d deletes (watch errors %q); want %d, %d, %d",
					inf.agent, a, u, d, errs, soakPods+added, updated, deleted)
			case <-poll.C:
			}
		}
	}
	g1, heap1, rss1 := processFootprint(t)
	watches, lists := 0, 0
	for i, inf := range infs {
		_, _, _, errs := inf.counts.get()
		if len(errs) != 0 {
			t.Errorf("%s: watch errors %q", inf.agent, errs)
		}
		if got := len(inf.store.List()); got != soakPods+len(live) {
			t.Errorf("%s holds %d pods, want %d", inf.agent, got, soakPods+len(live))
		}
		oneWatch(t, rig, inf.agent, protos[i])
		r := rig.requestsOf(inf.agent)
		watches += r[protos[i]+" watch"]
		lists += r[protos[i]+" list"]
	}
	for _, reason := range []string{"stalled", "behind", "failed", "timeout", "expired"} {
		if c := rig.watchesEnded(t, reason); c != 0 {
			t.Errorf("%d watches ended %s", c, reason)
		}
	}
	t.Logf("soak: %d informers, %v, a change every %v: %d added, %d updated, %d deleted; %d watch and %d list requests in all; events per informer %d (as made); goroutines %d → %d (max %d); heap %.1f → %.1f MiB; RSS %.1f → %.1f MiB (max %.1f; race detector: %v)",
		n, dur, soakEvery, added, updated, deleted, watches, lists, soakPods+added+updated+deleted,
		g0, g1, gMax, float64(heap0)/(1<<20), float64(heap1)/(1<<20), float64(rss0)/(1<<20), float64(rss1)/(1<<20), float64(rssMax)/(1<<20), raceEnabled)
	if g1 > g0+soakGoroutineSlack {
		t.Errorf("goroutines grew from %d to %d (slack %d)", g0, g1, soakGoroutineSlack)
	}
	if heap1 > heap0+soakHeapSlack {
		t.Errorf("the live heap grew from %d to %d bytes (slack %d)", heap0, heap1, soakHeapSlack)
	}
	if !raceEnabled && rss1 > rss0+soakRSSSlack {
		t.Errorf("RSS grew from %d to %d bytes (slack %d)", rss0, rss1, soakRSSSlack)
	}
}
