package conformance

import (
	"strings"
	"testing"
)

// TestCheckSequence checks what the watch cases accept of a pod's events:
// the implementation's own status events between the suite's changes,
// never a duplicate, a gap, a second ADDED or an event after DELETED.
func TestCheckSequence(t *testing.T) {
	final := map[string]string{"a": "v3"}
	for _, tc := range []struct {
		name  string
		steps []string
		want  string // a part of the diff; "" for none
	}{
		{"every change once", []string{"EVENT_TYPE_ADDED a v1 s1", "EVENT_TYPE_MODIFIED a v2 s1", "EVENT_TYPE_MODIFIED a v3 s1"}, ""},
		{"own status events", []string{"EVENT_TYPE_ADDED a v1 s1", "EVENT_TYPE_MODIFIED a v1 s2", "EVENT_TYPE_MODIFIED a v2 s2", "EVENT_TYPE_MODIFIED a v2 s3", "EVENT_TYPE_MODIFIED a v3 s3"}, ""},
		{"a duplicate", []string{"EVENT_TYPE_ADDED a v1 s1", "EVENT_TYPE_MODIFIED a v2 s1", "EVENT_TYPE_MODIFIED a v2 s1", "EVENT_TYPE_MODIFIED a v3 s1"}, "duplicate"},
		{"a gap", []string{"EVENT_TYPE_ADDED a v1 s1", "EVENT_TYPE_MODIFIED a v3 s1"}, "missing"},
		{"out of order", []string{"EVENT_TYPE_ADDED a v1 s1", "EVENT_TYPE_MODIFIED a v3 s1", "EVENT_TYPE_MODIFIED a v2 s1"}, "missing"},
		{"a second ADDED", []string{"EVENT_TYPE_ADDED a v1 s1", "EVENT_TYPE_ADDED a v2 s2", "EVENT_TYPE_MODIFIED a v3 s1"}, "second EVENT_TYPE_ADDED"},
		{"not ending at the last change", []string{"EVENT_TYPE_ADDED a v1 s1", "EVENT_TYPE_MODIFIED a v2 s1"}, "ends v2"},
		{"first not ADDED", []string{"EVENT_TYPE_MODIFIED a v1 s1"}, "first event"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := checkSequence(tc.steps, final, false)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("checkSequence(%v) = %q, want %q", tc.steps, got, tc.want)
			}
		})
	}
	if got := checkSequence([]string{"EVENT_TYPE_ADDED a v1 s1", "EVENT_TYPE_DELETED a v1 s2", "EVENT_TYPE_MODIFIED a v1 s3"}, nil, false); !strings.Contains(got, "after EVENT_TYPE_DELETED") {
		t.Errorf("an event after DELETED: %q", got)
	}
}
