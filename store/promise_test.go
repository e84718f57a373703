package store_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/store"
)

// The store's promise (store/doc.go): a watcher gets a snapshot and every
// later change, with no gap and no duplicate between the two. These tests
// replay each watcher's stream onto its snapshot and check, event by event,
// that it continues exactly from the state the watcher knows, and at the end
// that the watcher knows the store's final state.

// smallPod is a pod whose edits are cheap: the generation annotation is what
// changes between its versions.
func smallPod(n int, generation int) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace:   "ns",
		Name:        "pod-" + strconv.Itoa(n),
		UID:         types.UID(fmt.Sprintf("uid-%d", n)),
		Annotations: map[string]string{"generation": strconv.Itoa(generation)},
	}}
}

// replica is what one watcher knows: the pods of its snapshot with every
// event applied.
type replica struct {
	pods map[types.UID]*store.Pod
	seen int
}

func newReplica(snapshot []*store.Pod) *replica {
	r := &replica{pods: make(map[types.UID]*store.Pod, len(snapshot))}
	for _, p := range snapshot {
		r.pods[p.UID] = p
	}
	return r
}

// apply applies ev, or says how it breaks the promise: an ADDED of a pod the
// watcher knows is a duplicate; a MODIFIED whose previous version is not the
// one the watcher knows, or a DELETED of another version, means a change was
// missed or seen twice.
func (r *replica) apply(ev store.Event) error {
	r.seen++
	known := r.pods[ev.Pod.UID]
	switch ev.Type {
	case store.Added:
		if known != nil {
			return fmt.Errorf("event %d: ADDED %s, which the watcher already has (version %d)", r.seen, ev.Pod.UID, known.Version)
		}
		r.pods[ev.Pod.UID] = ev.Pod
	case store.Modified:
		if known == nil || ev.Prev != known {
			return fmt.Errorf("event %d: MODIFIED %s from version %d, but the watcher has %v", r.seen, ev.Pod.UID, ev.Prev.Version, versionOf(known))
		}
		r.pods[ev.Pod.UID] = ev.Pod
	case store.Deleted:
		if known == nil || ev.Pod != known {
			return fmt.Errorf("event %d: DELETED %s at version %d, but the watcher has %v", r.seen, ev.Pod.UID, ev.Pod.Version, versionOf(known))
		}
		delete(r.pods, ev.Pod.UID)
	default:
		return fmt.Errorf("event %d: type %v", r.seen, ev.Type)
	}
	return nil
}

// equal says how r differs from the store's current pods.
func (r *replica) equal(st *store.Store) error {
	_, pods := st.List()
	if len(pods) != len(r.pods) {
		return fmt.Errorf("the watcher has %d pods, the store %d", len(r.pods), len(pods))
	}
	for _, p := range pods {
		if r.pods[p.UID] != p {
			return fmt.Errorf("pod %s: the watcher has %v, the store version %d", p.UID, versionOf(r.pods[p.UID]), p.Version)
		}
	}
	return nil
}

func versionOf(p *store.Pod) string {
	if p == nil {
		return "no version"
	}
	return "version " + strconv.FormatUint(p.Version, 10)
}

// TestWatchPromiseConcurrent runs writers and watchers that join at random
// moments concurrently (run it with -race). Every watcher's stream, replayed
// onto its snapshot, must continue its state exactly, and end equal to the
// store's final state.
func TestWatchPromiseConcurrent(t *testing.T) {
	const (
		writers     = 4
		opsPerWrite = 2000
		watchers    = 16
		uids        = 24
	)
	st := store.New()
	var wg sync.WaitGroup
	type joined struct {
		r *replica
		w *store.Watcher
	}
	results := make(chan joined, watchers)
	start := make(chan struct{})
	for i := range writers {
		wg.Go(func() {
			<-start
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			for op := range opsPerWrite {
				n := rng.IntN(uids)
				if rng.IntN(4) == 0 {
					st.Delete(types.UID(fmt.Sprintf("uid-%d", n)))
				} else {
					st.Upsert(smallPod(n, i*opsPerWrite+op))
				}
			}
		})
	}
	var joiners sync.WaitGroup
	for i := range watchers {
		joiners.Go(func() {
			<-start
			// Join after a random number of the store's changes, while the
			// writers are busy: each watcher takes the events it has as it
			// goes, in a queue large enough never to be dropped.
			rng := rand.New(rand.NewPCG(uint64(i), 2))
			for range rng.IntN(2000) {
				runtime.Gosched()
			}
			var (
				r *replica
				w *store.Watcher
			)
			if i%2 == 0 {
				snapshot, sw := st.Watch(writers*opsPerWrite+1, nil)
				r, w = newReplica(snapshot), sw
			} else {
				// Resume from a revision listed earlier, while the writers
				// go on: the replay continues the listed state exactly.
				version, pods := st.List()
				for range rng.IntN(200) {
					runtime.Gosched()
				}
				replay, rw, err := st.WatchFrom(st.Revision(version), writers*opsPerWrite+1, nil)
				if err != nil {
					t.Errorf("watcher %d: resume from version %d: %v", i, version, err)
					return
				}
				r, w = newReplica(pods), rw
				for _, ev := range replayed(t, st, replay) {
					if err := r.apply(ev); err != nil {
						t.Errorf("watcher %d, replay: %v", i, err)
						return
					}
				}
			}
			for range 50 {
				for _, ev := range w.Take(nil) {
					if err := r.apply(ev); err != nil {
						t.Errorf("watcher %d: %v", i, err)
						return
					}
				}
			}
			results <- joined{r, w}
		})
	}
	close(start)
	wg.Wait()
	joiners.Wait()
	close(results)
	n := 0
	for j := range results {
		n++
		defer j.w.Stop()
		select {
		case <-j.w.Dropped():
			t.Fatalf("a watcher was dropped: its queue was meant to hold every change")
		default:
		}
		for _, ev := range j.w.Take(nil) {
			if err := j.r.apply(ev); err != nil {
				t.Fatal(err)
			}
		}
		if err := j.r.equal(st); err != nil {
			t.Fatalf("after every change: %v", err)
		}
	}
	if n != watchers && !t.Failed() {
		t.Fatalf("%d watchers finished, want %d", n, watchers)
	}
}

// fuzzHistory is the history of the stores of FuzzWatchPromise: small, so
// that resumes fall both inside and outside it.
const fuzzHistory = 8

// FuzzWatchPromise drives the store with a script: each byte either writes
// (upsert or delete of one of a few pods), joins a watcher, resumes a
// watcher from one of the latest revisions, or lets a watcher take its
// events. Whatever the interleaving, every watcher's stream continues its
// state exactly and ends equal to the store's final state; a resume fails
// with ErrRevisionTooOld exactly when its revision left the history.
func FuzzWatchPromise(f *testing.F) {
	f.Add([]byte{0x10, 0x20, 0xc0, 0x11, 0x51, 0xe0, 0x12, 0xc0, 0x92, 0xe1})
	f.Add([]byte{0xc0, 0x00, 0x40, 0x80, 0xc0, 0xe0, 0xe1, 0x01, 0x41})
	f.Add([]byte{0x01, 0x02, 0x03, 0xd1, 0x81, 0xd0, 0x04, 0xd3, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0xdf, 0xd9, 0xe0, 0xe1})
	f.Fuzz(func(t *testing.T, script []byte) {
		if len(script) > 4096 {
			return
		}
		st := store.New(store.WithHistory(fuzzHistory, 1<<30))
		var ws []*store.Watcher
		var rs []*replica
		defer func() {
			for _, w := range ws {
				w.Stop()
			}
		}()
		// states holds the store's pods at each version.
		states := map[uint64][]*store.Pod{0: nil}
		generation := 0
		for _, b := range script {
			n := int(b & 0x0f)
			switch b >> 6 {
			case 0, 1: // Upsert pod n.
				generation++
				st.Upsert(smallPod(n, generation))
				v, pods := st.List()
				states[v] = pods
			case 2: // Delete pod n.
				st.Delete(types.UID(fmt.Sprintf("uid-%d", n)))
				v, pods := st.List()
				states[v] = pods
			case 3:
				if b&0x30 == 0 { // A watcher joins.
					snapshot, w := st.Watch(len(script)+1, nil)
					ws, rs = append(ws, w), append(rs, newReplica(snapshot))
				} else if b&0x30 == 0x10 { // A watcher resumes n changes back.
					current, _ := st.List()
					from := current - min(uint64(n), current)
					replay, w, err := st.WatchFrom(st.Revision(from), len(script)+1, nil)
					if current-from > fuzzHistory {
						if !errors.Is(err, store.ErrRevisionTooOld) {
							t.Fatalf("resume %d changes back, out of a history of %d: %v, want ErrRevisionTooOld", current-from, fuzzHistory, err)
						}
						continue
					}
					if err != nil {
						t.Fatalf("resume from version %d at %d: %v", from, current, err)
					}
					r := newReplica(states[from])
					for _, ev := range replayed(t, st, replay) {
						if err := r.apply(ev); err != nil {
							t.Fatalf("replay from version %d: %v", from, err)
						}
					}
					if err := r.equal(st); err != nil {
						t.Fatalf("after the replay from version %d: %v", from, err)
					}
					ws, rs = append(ws, w), append(rs, r)
				} else if len(ws) > 0 { // Watcher n takes its events.
					i := n % len(ws)
					for _, ev := range ws[i].Take(nil) {
						if err := rs[i].apply(ev); err != nil {
							t.Fatalf("watcher %d: %v", i, err)
						}
					}
				}
			}
		}
		for i, w := range ws {
			for _, ev := range w.Take(nil) {
				if err := rs[i].apply(ev); err != nil {
					t.Fatalf("watcher %d: %v", i, err)
				}
			}
			if err := rs[i].equal(st); err != nil {
				t.Fatalf("watcher %d at the end: %v", i, err)
			}
		}
	})
}
