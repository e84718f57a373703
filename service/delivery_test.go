package service_test

import (
	"fmt"
	"strconv"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestWatchOrdering starts watchers while pods change concurrently and checks
// that each sees every change of every pod exactly once, in order, after its
// snapshot: no gap, no duplicate.
func TestWatchOrdering(t *testing.T) {
	const pods, changes = 5, 400
	var initial []*corev1.Pod
	for i := range pods {
		initial = append(initial, podstest.Pod("default", fmt.Sprintf("pod-%d", i), i))
	}
	h := newHarness(t, synced(nil, initial...), true)
	clients := []client{}
	for _, kind := range clientKinds {
		clients = append(clients, kind.dial(t, h), kind.dial(t, h))
	}

	// The writer gives change k to pod k%pods, with resourceVersion k, so
	// that each pod's versions grow by exactly pods.
	startWatcher := make(map[int]bool) // change after which a watcher starts
	for i := range clients {
		startWatcher[i*changes/len(clients)] = true
	}
	var wg sync.WaitGroup
	results := make([]map[types.UID][]int, len(clients))
	errs := make([]error, len(clients))
	final := make(map[types.UID]int)
	for _, p := range initial {
		final[p.UID] = 1
	}
	next := 0
	for k := 0; k <= changes; k++ {
		if startWatcher[k] {
			i := next
			next++
			w, err := clients[i].Watch(t.Context(), &podsv1alpha1.PodWatchRequest{})
			if err != nil {
				t.Fatal(err)
			}
			ready := make(chan struct{})
			wg.Go(func() { results[i], errs[i] = collect(w, ready, final, pods*2) })
			<-ready // the watch is registered: it received its first event
		}
		if k == 0 {
			continue
		}
		p := initial[k%pods].DeepCopy()
		p.ResourceVersion = strconv.Itoa(k + 1)
		p.Status.ContainerStatuses[0].RestartCount = int32(k)
		h.store.Upsert(p)
		final[p.UID] = k + 1
	}
	h.store.Upsert(podstest.Pod("zz", "end-marker", 99))
	wg.Wait()
	for i, seen := range results {
		if errs[i] != nil {
			t.Fatalf("watcher %d: %v", i, errs[i])
		}
		for uid, rvs := range seen {
			for j := 1; j < len(rvs); j++ {
				if rvs[j] != rvs[j-1]+pods && !(rvs[j-1] == 1 && rvs[j] <= 1+pods) {
					t.Fatalf("watcher %d, pod %s: versions %v: gap or duplicate at %d", i, uid, rvs, j)
				}
			}
			if last := rvs[len(rvs)-1]; last != final[uid] {
				t.Fatalf("watcher %d, pod %s: last version %d, want %d", i, uid, last, final[uid])
			}
		}
	}
}

// collect reads a watch until the end marker pod is added, and returns the
// resource versions it saw per pod. ready is closed at the first event.
func collect(recv func() (*podsv1alpha1.PodWatchResponse, error), ready chan struct{}, _ map[types.UID]int, _ int) (map[types.UID][]int, error) {
	seen := make(map[types.UID][]int)
	synced := false
	for first := true; ; first = false {
		ev, err := recv()
		if first {
			close(ready)
		}
		if err != nil {
			return nil, err
		}
		switch ev.GetType() {
		case podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE:
			if synced {
				return nil, fmt.Errorf("second INITIAL_SYNC_COMPLETE")
			}
			synced = true
			continue
		case podsv1alpha1.EventType_EVENT_TYPE_ADDED:
			if synced && ev.GetPod().GetMetadata().GetName() == "end-marker" {
				return seen, nil
			}
		case podsv1alpha1.EventType_EVENT_TYPE_MODIFIED:
			if !synced {
				return nil, fmt.Errorf("MODIFIED before INITIAL_SYNC_COMPLETE")
			}
		default:
			return nil, fmt.Errorf("unexpected event %v", ev.GetType())
		}
		uid := types.UID(ev.GetPod().GetMetadata().GetUid())
		rv, err := strconv.Atoi(ev.GetPod().GetMetadata().GetResourceVersion())
		if err != nil {
			return nil, err
		}
		seen[uid] = append(seen[uid], rv)
	}
}
