package store_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// withAnnotation returns a copy of pod with an annotation of n bytes.
func withAnnotation(pod *corev1.Pod, n int) *corev1.Pod {
	p := pod.DeepCopy()
	p.Annotations = map[string]string{"big": strings.Repeat("x", n)}
	return p
}

// TestMaxPodBytes: a pod over the bound (issue 25: one 100 MiB pod was
// taken, and every client with a 4 MiB receive limit then failed ListPods)
// is refused, reported and counted, and never stored; the pod's previous
// version stays. The default is the API server's object limit.
func TestMaxPodBytes(t *testing.T) {
	small := podstest.Pod("ns", "a", 1)
	tests := []struct {
		name    string
		opts    []store.Option
		size    int
		refused bool
	}{
		{"default bound, over it", nil, store.DefaultMaxPodBytes, true},
		{"default bound, under it", nil, store.DefaultMaxPodBytes - 64<<10, false},
		{"zero keeps the default", []store.Option{store.WithMaxPodBytes(0)}, store.DefaultMaxPodBytes, true},
		{"small bound", []store.Option{store.WithMaxPodBytes(16 << 10)}, 16 << 10, true},
		{"no bound", []store.Option{store.WithMaxPodBytes(-1)}, 4 * store.DefaultMaxPodBytes, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var errs []error
			st := store.New(append(tt.opts, store.WithErrorHandler(func(err error) { errs = append(errs, err) }))...)
			st.Upsert(small)
			before, _ := st.List()
			big := withAnnotation(small, tt.size)
			st.Upsert(big)
			other := withAnnotation(podstest.Pod("ns", "b", 2), tt.size)
			st.Upsert(other)
			p, _ := st.Get(small.UID)
			raw, _ := small.Marshal()
			_, stored := st.Get(other.UID)
			version, _ := st.List()
			if !tt.refused {
				if len(errs) != 0 || st.TooLarge() != 0 || !stored || string(p.Raw()) == string(raw) {
					t.Fatalf("a pod of %d bytes of annotation was not taken: errors %v, TooLarge %d", tt.size, errs, st.TooLarge())
				}
				return
			}
			if stored || string(p.Raw()) != string(raw) || version != before {
				t.Fatalf("a pod of %d bytes of annotation was stored (new pod stored %v, version %d → %d)", tt.size, stored, before, version)
			}
			if st.TooLarge() != 2 || len(errs) != 2 || !errors.Is(errs[0], store.ErrPodTooLarge) || !strings.Contains(errs[0].Error(), "ns/a") {
				t.Fatalf("TooLarge %d, errors %v: want 2, ErrPodTooLarge naming the pod", st.TooLarge(), errs)
			}
		})
	}
}

// TestLargePodKeepsHistory: one change larger than --watch-history-bytes
// (issue 25: it emptied the history, and every resume failed) leaves the
// earlier changes resumable.
func TestLargePodKeepsHistory(t *testing.T) {
	const historyBytes = 64 << 10
	st := store.New(store.WithHistory(100, historyBytes), store.WithMaxPodBytes(-1))
	for i := range 5 {
		p := podstest.Pod("ns", fmt.Sprintf("p%d", i), i)
		st.Upsert(p)
	}
	st.Upsert(withAnnotation(podstest.Pod("ns", "big", 9), 2*historyBytes))
	current, _ := st.List()
	replay, w, err := st.WatchFrom(st.Revision(current-5), 10, nil)
	if err != nil {
		n, b := st.HistoryLen()
		t.Fatalf("resume from before the large change: %v (history: %d changes, %d bytes)", err, n, b)
	}
	w.Stop()
	if events := replayed(t, st, replay); len(events) != 5 {
		t.Fatalf("%d changes replayed, want 5", len(events))
	}
	// Later changes push it out, and the history is bounded again.
	for i := range 50 {
		st.Upsert(podstest.Pod("ns", fmt.Sprintf("q%d", i), i))
	}
	if _, b := st.HistoryLen(); b > historyBytes {
		t.Fatalf("history counts %d bytes, over its bound %d", b, historyBytes)
	}
}
