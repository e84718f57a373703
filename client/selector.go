package client

import (
	"fmt"
	"slices"
	"strings"

	"connectrpc.com/connect"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/podtypes"
)

// SelectableFields are the pod fields WithFieldSelector may name: those of
// the API server's pod field selectors, as the server supports them.
var SelectableFields = podtypes.SelectableFields

// selection is the namespace, label selector and field selector of a call,
// as given.
type selection struct {
	namespace, labelSel, fieldSel string
}

// empty reports whether the selection selects every pod.
func (s selection) empty() bool {
	return s.namespace == "" && strings.TrimSpace(s.labelSel) == "" && strings.TrimSpace(s.fieldSel) == ""
}

// matcher is a parsed selection, which the client applies itself against a
// server without selectors. A nil *matcher selects every pod.
type matcher struct {
	namespace string
	labels    labels.Selector
	fields    fields.Selector
}

// newMatcher parses s as the server does, strictly: a selector that does
// not parse, or names a field not in SelectableFields, is INVALID_ARGUMENT.
func newMatcher(s selection) (*matcher, error) {
	if s.empty() {
		return nil, nil
	}
	m := &matcher{namespace: s.namespace}
	if strings.TrimSpace(s.labelSel) != "" {
		ls, err := labels.Parse(s.labelSel)
		if err != nil {
			return nil, errSelector("label selector", err)
		}
		m.labels = ls
	}
	if strings.TrimSpace(s.fieldSel) != "" {
		fs, err := fields.ParseSelector(s.fieldSel)
		if err != nil {
			return nil, errSelector("field selector", err)
		}
		for _, r := range fs.Requirements() {
			if !slices.Contains(SelectableFields, r.Field) {
				return nil, errSelector("field selector", fmt.Errorf("field %q is not supported: the supported fields are %s", r.Field, strings.Join(SelectableFields, ", ")))
			}
		}
		m.fields = fs
	}
	return m, nil
}

// errSelector reports a selector the client rejects itself.
func errSelector(which string, err error) error {
	return &apiError{sentinel: ErrInvalidSelector, err: connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("invalid %s: %w", which, err))}
}

// matches reports whether pod, whole, is selected.
func (m *matcher) matches(pod *corev1.Pod) bool {
	if m == nil {
		return true
	}
	if m.namespace != "" && pod.Namespace != m.namespace {
		return false
	}
	if m.labels != nil && !m.labels.Matches(labels.Set(pod.Labels)) {
		return false
	}
	return m.fields == nil || m.fields.Matches(podtypes.FieldsOf(pod))
}

// filter returns the pods m selects, in place.
func (m *matcher) filter(pods []*corev1.Pod) []*corev1.Pod {
	if m == nil {
		return pods
	}
	return slices.DeleteFunc(pods, func(p *corev1.Pod) bool { return !m.matches(p) })
}

// eventFilter turns the events of every pod into those of the selected
// pods, with the API server's semantics: Added when a pod starts to match,
// Deleted (with its new state) when it stops, Modified while it matches.
type eventFilter struct {
	m    *matcher
	seen map[types.UID]bool
}

func newEventFilter(m *matcher) *eventFilter {
	return &eventFilter{m: m, seen: make(map[types.UID]bool)}
}

// apply returns the event to report for ev, and false when there is none.
// It needs the whole pod of ev.
func (f *eventFilter) apply(ev Event) (Event, bool) {
	if ev.Pod == nil {
		return ev, true
	}
	uid := ev.Pod.UID
	was := f.seen[uid]
	if ev.Type == Deleted {
		delete(f.seen, uid)
		return ev, was
	}
	now := f.m.matches(ev.Pod)
	switch {
	case now && !was:
		f.seen[uid] = true
		ev.Type = Added
	case !now && was:
		delete(f.seen, uid)
		ev.Type = Deleted
	case !now:
		return ev, false
	default:
		ev.Type = Modified
	}
	return ev, true
}
