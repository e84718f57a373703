package service_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestResumeHerdConverges is issue 25's findings 1 and 2, scaled down: a
// herd of watchers resuming from nearby revisions far back in the history,
// while the pods change, all reach INITIAL_SYNC_COMPLETE with every change
// after their revision, in order and once, and the server envelopes the
// replayed changes once for the herd, not once per watcher (it enveloped
// 100 × 284 of them before: the views of changes that left the live
// watchers' queues are not kept). The churn is driven by the events the herd
// received, not by time, so that no watcher can fall behind however slow
// the machine: 100 watchers × 384 changes replayed, one change per 1,000
// events received, at most 39 changes queued for a watcher of 100.
func TestResumeHerdConverges(t *testing.T) {
	const (
		watchers = 100
		perConn  = 50
		pods     = 50
		changes  = 1000
		back     = 384 // the first watcher resumes this many changes back
		queue    = 100
		churnPer = 1000 // events received by the herd per change
	)
	for i, kind := range podstest.ClientKinds {
		t.Run(kind.Name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			pod := func(k, rv int) *corev1.Pod {
				p := podstest.Pod("herd", fmt.Sprintf("p%02d", k), k)
				p.Annotations = map[string]string{"pad": strings.Repeat("x", 500)}
				p.ResourceVersion = strconv.Itoa(rv)
				return p
			}
			var initial []*corev1.Pod
			for k := range pods {
				initial = append(initial, pod(k, 1))
			}
			f := startWith(t, server.Config{Registry: reg, Watch: server.WatchConfig{Queue: queue}}, []store.Option{store.WithHistory(4000, 1<<30)}, initial...)
			rv := 1
			change := func() {
				rv++
				f.Store.Upsert(pod(rv%pods, rv))
			}
			for range changes {
				change()
			}
			current, _ := f.Store.List()
			// Watches must be open before the churn starts, so the watch
			// of the herd's first watcher is registered before any
			// change; the churner waits for the herd's events.
			var received atomic.Int64
			tick := make(chan struct{}, 1)
			done := make(chan struct{})
			var churn sync.WaitGroup
			churn.Add(1)
			go func() {
				defer churn.Done()
				next := int64(churnPer)
				for {
					select {
					case <-done:
						return
					case <-tick:
					}
					for received.Load() >= next {
						change()
						next += churnPer
					}
				}
			}()
			var clients []podstest.APIClient
			for range (watchers + perConn - 1) / perConn {
				clients = append(clients, podstest.ClientKinds[i].Dial(t, f.Socket))
			}
			var wg sync.WaitGroup
			errs := make(chan error, watchers)
			for w := range watchers {
				from := current - back + uint64(w)
				wg.Go(func() {
					s, err := clients[w/perConn].WatchReq(t.Context(), &podsv1alpha1.PodWatchRequest{ResumeFrom: f.Store.Revision(from)}, nil)
					if err != nil {
						errs <- fmt.Errorf("watcher %d: %w", w, err)
						return
					}
					want := from + 1
					for {
						ev, err := s.Recv()
						if err != nil {
							errs <- fmt.Errorf("watcher %d after %d events: %w", w, want-from-1, err)
							return
						}
						if received.Add(1)%100 == 0 {
							select {
							case tick <- struct{}{}:
							default:
							}
						}
						if ev.GetType() == podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE {
							if want != current+1 && want == from+1 {
								errs <- fmt.Errorf("watcher %d: synced with nothing replayed", w)
							}
							return
						}
						if got := ev.GetRevision(); got != f.Store.Revision(want) {
							errs <- fmt.Errorf("watcher %d: event of revision %s, want %s", w, got, f.Store.Revision(want))
							return
						}
						want++
					}
				})
			}
			wg.Wait()
			close(done)
			churn.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			enveloped := podstest.MetricValue(t, reg, "podsapi_view_computes_total", map[string]string{"view": "watch"})
			blocks := podstest.MetricValue(t, reg, "podsapi_view_computes_total", map[string]string{"view": "replay"})
			t.Logf("enveloped %v events one at a time, %v shared blocks", enveloped, blocks)
			if limit := float64(watchers * back / 4); enveloped > limit {
				t.Errorf("the server enveloped %v watch events for %d watchers replaying about %d changes each: over %v, the replay is enveloped per watcher", enveloped, watchers, back, limit)
			}
		})
	}
}
