package store_test

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/podsapi/podsapi/podtypes"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestSelectableFields checks the fields and labels the store keeps for
// selectors.
func TestSelectableFields(t *testing.T) {
	st := store.New()
	pod := podstest.Pod("ns", "a", 1)
	pod.Spec.HostNetwork = true
	pod.Status.NominatedNodeName = "node-2"
	pod.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.7"}, {IP: "fd00::7"}}
	st.Upsert(pod)
	p, _ := st.Get(pod.UID)
	// The values are podtypes' (tested there), computed when the pod is
	// written.
	if p.Fields() != fields.Fields(podtypes.FieldsOf(pod)) {
		t.Errorf("the store's fields %+v, want podtypes.FieldsOf's %+v", p.Fields(), podtypes.FieldsOf(pod))
	}
	if p.Fields().Has("spec.containers") {
		t.Error("spec.containers is selectable")
	}
	if sel := fields.ParseSelectorOrDie("status.phase=Running,spec.hostNetwork!=false"); !sel.Matches(p.Fields()) {
		t.Errorf("%v does not match", sel)
	}
	if !labels.SelectorFromSet(labels.Set{"tier": "web"}).Matches(p.Labels()) {
		t.Errorf("labels %v do not have tier=web", p.Labels())
	}
	// The store keeps its own copy of the labels.
	pod.Labels["tier"] = "changed"
	if p.Labels().Get("tier") != "web" {
		t.Errorf("the store's labels changed with the caller's pod: %v", p.Labels())
	}
}

// TestHistoryBounds checks that the history keeps the latest changes within
// its bounds of count and bytes, and that WatchFrom serves exactly those.
func TestHistoryBounds(t *testing.T) {
	pod := podstest.Pod("ns", "a", 1)
	pod.ResourceVersion = "000" // as long as those below, for equal sizes
	raw, _ := pod.Marshal()
	cases := []struct {
		name     string
		events   int
		bytes    int64
		wantKept int
	}{
		{"by count", 3, 1 << 30, 3},
		{"by bytes", 100, int64(2*len(raw) + 2*512 + 10), 2},
		{"none", -1, 1 << 30, 0},
		{"zero keeps the default", 0, 1 << 30, 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := store.New(store.WithHistory(tc.events, tc.bytes))
			for i := range 10 {
				p := pod.DeepCopy()
				p.ResourceVersion = fmt.Sprintf("%03d", i+1)
				st.Upsert(p)
			}
			if n, _ := st.HistoryLen(); n != tc.wantKept {
				t.Fatalf("history holds %d changes, want %d", n, tc.wantKept)
			}
			current, _ := st.List()
			for from := uint64(0); from <= current; from++ {
				replay, w, err := st.WatchFrom(st.Revision(from), 10, nil)
				inside := current-from <= uint64(tc.wantKept)
				if inside != (err == nil) || (!inside && !errors.Is(err, store.ErrRevisionTooOld)) {
					t.Fatalf("resume from %d of %d with %d kept: %v", from, current, tc.wantKept, err)
				}
				if err != nil {
					continue
				}
				w.Stop()
				if events := replayed(t, st, replay); len(events) != int(current-from) || (len(events) > 0 && events[0].Version != from+1) {
					t.Fatalf("resume from %d of %d: %d changes replayed", from, current, len(events))
				}
			}
			if _, _, err := st.WatchFrom(st.Revision(current+1), 10, nil); !errors.Is(err, store.ErrRevisionInvalid) {
				t.Fatalf("a revision ahead of the store: %v, want ErrRevisionInvalid", err)
			}
			if _, _, err := st.WatchFrom(store.New().Revision(current), 10, nil); !errors.Is(err, store.ErrRevisionTooOld) {
				t.Fatalf("a revision of another store: %v, want ErrRevisionTooOld", err)
			}
			if _, _, err := st.WatchFrom("nonsense", 10, nil); !errors.Is(err, store.ErrRevisionInvalid) {
				t.Fatalf("a malformed revision: %v, want ErrRevisionInvalid", err)
			}
		})
	}
}
