package store

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/budget"
	"github.com/podsapi/podsapi/podtypes"
)

// Store keeps the current version of every pod of the node. It is safe for
// concurrent use. The zero value is not usable; call New.
type Store struct {
	mu       sync.Mutex
	pods     map[types.UID]*Pod
	sorted   []*Pod // the pods in List order; nil when stale
	version  uint64
	synced   chan struct{}
	watchers map[*Watcher]struct{}
	onError  func(error)
	encodes  atomic.Uint64
	// maxPodBytes bounds one pod's encoding (0: no bound); tooLarge counts
	// the versions refused for it (podsize.go).
	maxPodBytes int
	tooLarge    atomic.Uint64
	instance    string
	history     history
	// viewLag is the largest queue of a watcher so far: a change older
	// than that has left every live watcher's queue.
	viewLag int
	// index and tombs find pods by container ID, IP and UID, deleted ones
	// included (find.go, tombstones.go).
	index index
	tombs tombstones
	// rt are the runtime's facts (runtime.go).
	rt runtimeFacts
	// changed is closed at the next change of what Find sees, while
	// someone waits for one (changes.go).
	changed chan struct{}
	// budget counts what the store keeps for its clients (WithBudget);
	// queued counts the events queued for watchers, and historyBytes
	// mirrors history.bytes, both read without the lock.
	budget       *budget.Budget
	queued       atomic.Int64
	historyBytes atomic.Int64
}

// Option configures a Store.
type Option func(*Store)

// WithErrorHandler sets the function told about pods the store could not
// take (a pod that cannot be encoded). By default such errors are dropped.
func WithErrorHandler(f func(error)) Option {
	return func(s *Store) { s.onError = f }
}

// New returns an empty, not yet synced Store.
func New(opts ...Option) *Store {
	s := &Store{
		pods:        make(map[types.UID]*Pod),
		synced:      make(chan struct{}),
		watchers:    make(map[*Watcher]struct{}),
		onError:     func(error) {},
		instance:    newInstance(),
		history:     history{maxEvents: DefaultHistory, maxBytes: DefaultHistoryBytes},
		maxPodBytes: DefaultMaxPodBytes,
		index:       newIndex(),
		tombs:       newTombstones(),
		rt:          newRuntimeFacts(),
		budget:      budget.ForSetting(0),
	}
	for _, opt := range opts {
		opt(s)
	}
	s.budget.Track(budget.History, s.HistoryBytes)
	s.budget.Track(budget.Queued, s.queuedBytes)
	return s
}

// Upsert adds pod or replaces the version of the pod with the same UID. It
// encodes the pod once, and computes what selectors match (its labels and
// SelectableFields) once; a version whose encoding equals the current one is
// not a change and notifies nobody. The store does not keep pod itself.
func (s *Store) Upsert(pod *corev1.Pod) {
	raw, err := pod.Marshal()
	s.encodes.Add(1)
	if err != nil {
		s.onError(fmt.Errorf("encode pod %s/%s (uid %s): %w", pod.Namespace, pod.Name, pod.UID, err))
		return
	}
	if !s.checkSize(pod.Namespace, pod.Name, string(pod.UID), raw) {
		return
	}
	keys := newPodKeys(pod)
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.pods[pod.UID]
	if prev != nil && bytes.Equal(prev.raw, raw) {
		return
	}
	s.version++
	p := &Pod{
		UID: pod.UID, Namespace: pod.Namespace, Name: pod.Name, Version: s.version, raw: raw,
		labels: podLabels(pod, prev), fields: podtypes.FieldsOf(pod), keys: keys,
		budget: s.budget,
	}
	s.pods[pod.UID] = p
	s.indexPut(prev, p)
	s.took(prev, p)
}

// took tells the list order, the watchers and the waiting calls that p,
// just stored, is new (prev nil) or replaces prev. s.mu is held.
func (s *Store) took(prev, p *Pod) {
	if prev == nil || prev.Namespace != p.Namespace || prev.Name != p.Name {
		s.sorted = nil
	} else if s.sorted != nil {
		s.sorted = replaced(s.sorted, prev, p)
	}
	ev := Event{Type: Added, Pod: p, Version: s.version}
	if prev != nil {
		ev = Event{Type: Modified, Pod: p, Prev: prev, Version: s.version}
	}
	s.broadcast(ev)
	s.signalChange()
}

// Encodes returns how many pods the store has encoded since it was created:
// one per Upsert.
func (s *Store) Encodes() uint64 { return s.encodes.Load() }

// Delete removes the pod with the given UID, if the store has it.
func (s *Store) Delete(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, ok := s.pods[uid]
	if !ok {
		return
	}
	s.version++
	delete(s.pods, uid)
	s.index.remove(uid, prev.keys, nil)
	s.bury(prev)
	s.sorted = nil
	s.broadcast(Event{Type: Deleted, Pod: prev, Version: s.version})
	s.signalChange()
}

// MarkSynced reports that the sources have delivered their initial, complete
// state. Calls after the first have no effect.
func (s *Store) MarkSynced() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.synced:
	default:
		close(s.synced)
	}
}

// Synced reports whether MarkSynced has been called.
func (s *Store) Synced() bool {
	select {
	case <-s.synced:
		return true
	default:
		return false
	}
}

// SyncedC returns a channel that is closed when the store has synced.
func (s *Store) SyncedC() <-chan struct{} { return s.synced }

// List returns the current pods sorted by namespace, name and UID, and the
// store version they reflect. The slice is shared and must not be modified.
func (s *Store) List() (version uint64, pods []*Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version, s.list()
}

// Get returns the current version of the pod with the given UID.
func (s *Store) Get(uid types.UID) (*Pod, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pods[uid]
	return p, ok
}

// list returns the sorted pods, rebuilding them when stale. s.mu is held.
func (s *Store) list() []*Pod {
	if s.sorted == nil {
		sorted := make([]*Pod, 0, len(s.pods))
		for _, p := range s.pods {
			sorted = append(sorted, p)
		}
		slices.SortFunc(sorted, comparePods)
		s.sorted = sorted
	}
	return s.sorted
}

// replaced returns a copy of pods with prev replaced by next, which sorts at
// the same place. The slice handed out by List is never modified.
func replaced(pods []*Pod, prev, next *Pod) []*Pod {
	i, found := slices.BinarySearchFunc(pods, prev, comparePods)
	if !found {
		return nil
	}
	out := slices.Clone(pods)
	out[i] = next
	return out
}

// comparePods orders pods by namespace, name and UID.
func comparePods(a, b *Pod) int {
	return cmp.Or(
		cmp.Compare(a.Namespace, b.Namespace),
		cmp.Compare(a.Name, b.Name),
		cmp.Compare(a.UID, b.UID),
	)
}

// current reports whether p is the current version of its pod. The store
// must be locked.
func (s *Store) current(p *Pod) bool { return s.pods[p.UID] == p }
