package sourcetest

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// WaitTimeout bounds every wait of the helpers of this package.
const WaitTimeout = 10 * time.Second

// WaitBound is how long a wait of t for an event may take: nine tenths of
// what go test's -timeout leaves t, so that a busy machine slows the tests
// without failing them and a wait that never ends fails with its own
// message; WaitTimeout when t has no deadline, or runs in a synctest
// bubble (whose clock only moves when every goroutine waits, and where
// t.Deadline panics).
func WaitBound(t testing.TB) (bound time.Duration) {
	d, ok := t.(interface{ Deadline() (time.Time, bool) })
	if !ok {
		return WaitTimeout
	}
	defer func() {
		if recover() != nil {
			bound = WaitTimeout
		}
	}()
	if deadline, ok := d.Deadline(); ok {
		return time.Until(deadline) * 9 / 10
	}
	return WaitTimeout
}

// CallKind is the kind of one Sink call.
type CallKind string

// The kinds of Sink calls.
const (
	UpsertCall CallKind = "upsert"
	DeleteCall CallKind = "delete"
	SyncedCall CallKind = "synced"
)

// Call is one recorded Sink call.
type Call struct {
	Kind CallKind
	UID  types.UID
	Pod  *corev1.Pod // Set for upserts.
}

// String renders the call as "upsert ns/name uid", "delete uid" or "synced".
func (c Call) String() string {
	switch c.Kind {
	case UpsertCall:
		return fmt.Sprintf("upsert %s/%s %s", c.Pod.Namespace, c.Pod.Name, c.UID)
	case DeleteCall:
		return fmt.Sprintf("delete %s", c.UID)
	default:
		return string(c.Kind)
	}
}

// State is what a Recorder's sink holds: the pods by UID and whether it was
// marked synced.
type State struct {
	Pods   map[types.UID]*corev1.Pod
	Synced bool
	Calls  []Call
}

// Recorder is a Sink (Upsert, Delete, MarkSynced) that records every call
// and keeps the pods the calls leave, like the store does. It is safe for
// concurrent use. Make one with NewRecorder.
type Recorder struct {
	mu      sync.Mutex
	state   State
	changed chan struct{} // Closed and replaced at each call.
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{
		state:   State{Pods: make(map[types.UID]*corev1.Pod)},
		changed: make(chan struct{}),
	}
}

// Upsert records the call and stores pod under its UID.
func (r *Recorder) Upsert(pod *corev1.Pod) {
	r.record(Call{Kind: UpsertCall, UID: pod.UID, Pod: pod}, func(s *State) { s.Pods[pod.UID] = pod })
}

// Delete records the call and removes the pod with the UID.
func (r *Recorder) Delete(uid types.UID) {
	r.record(Call{Kind: DeleteCall, UID: uid}, func(s *State) { delete(s.Pods, uid) })
}

// MarkSynced records the call and marks the sink synced.
func (r *Recorder) MarkSynced() {
	r.record(Call{Kind: SyncedCall}, func(s *State) { s.Synced = true })
}

func (r *Recorder) record(c Call, apply func(*State)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state.Calls = append(r.state.Calls, c)
	apply(&r.state)
	close(r.changed)
	r.changed = make(chan struct{})
}

// Snapshot returns a copy of the current state.
func (r *Recorder) Snapshot() State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.snapshot()
}

func (r *Recorder) snapshot() State {
	return State{Pods: maps.Clone(r.state.Pods), Synced: r.state.Synced, Calls: slices.Clone(r.state.Calls)}
}

// Wait waits up to WaitBound(t) until cond holds for the state, and returns
// that state. It fails the test, describing what, when cond does not hold in
// time.
func (r *Recorder) Wait(t testing.TB, what string, cond func(State) bool) State {
	t.Helper()
	bound := WaitBound(t)
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		s, changed := r.snapshot(), r.changed
		r.mu.Unlock()
		if cond(s) {
			return s
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s; sink calls:\n%s", bound, what, FormatCalls(s.Calls))
			return s
		}
	}
}

// WaitPods waits until the sink is synced and holds exactly the pods with
// the given UIDs, each satisfying match when match is not nil.
func (r *Recorder) WaitPods(t testing.TB, match func(*corev1.Pod) bool, uids ...types.UID) State {
	t.Helper()
	want := slices.Sorted(slices.Values(uids))
	return r.Wait(t, fmt.Sprintf("synced pods %v", want), func(s State) bool {
		if !s.Synced || !slices.Equal(slices.Sorted(maps.Keys(s.Pods)), want) {
			return false
		}
		for _, p := range s.Pods {
			if match != nil && !match(p) {
				return false
			}
		}
		return true
	})
}

// FormatCalls renders calls one per line.
func FormatCalls(calls []Call) string {
	var b []byte
	for i, c := range calls {
		b = fmt.Appendf(b, "  %d: %s\n", i, c)
	}
	return string(b)
}

// Count returns how many calls of kind are in calls.
func Count(calls []Call, kind CallKind) int {
	n := 0
	for _, c := range calls {
		if c.Kind == kind {
			n++
		}
	}
	return n
}
