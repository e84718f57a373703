package service

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/podsapi/podsapi/store"
)

// maxSelectorLen bounds each selector of a request, in bytes (the whole
// request is bounded too, by the server's read limit).
const maxSelectorLen = 1024

// selector is the namespace, label selector and field selector of a
// ListPods or WatchPods request, parsed once per request. A nil *selector
// selects every pod.
type selector struct {
	namespace string
	labels    labels.Selector // nil selects every pod
	fields    fields.Selector // nil selects every pod
	// key names the selection in the keys of cached lists.
	key string
}

// newSelector parses the selectors of a request, strictly: a selector that
// does not parse, or a field selector naming a field that is not one of
// store.SelectableFields, is an INVALID_ARGUMENT naming it. It returns nil
// when every selector is empty.
func newSelector(namespace, labelSelector, fieldSelector string) (*selector, error) {
	if namespace == "" && labelSelector == "" && fieldSelector == "" {
		return nil, nil
	}
	for name, v := range map[string]string{"namespace": namespace, "label_selector": labelSelector, "field_selector": fieldSelector} {
		if len(v) > maxSelectorLen {
			return nil, errSelector(name, fmt.Errorf("%d bytes, more than the limit of %d", len(v), maxSelectorLen))
		}
	}
	s := &selector{namespace: namespace}
	if strings.TrimSpace(labelSelector) != "" {
		ls, err := labels.Parse(labelSelector)
		if err != nil {
			return nil, errSelector("label_selector", err)
		}
		if !ls.Empty() {
			s.labels = ls
		}
	}
	if strings.TrimSpace(fieldSelector) != "" {
		fs, err := fields.ParseSelector(fieldSelector)
		if err != nil {
			return nil, errSelector("field_selector", err)
		}
		for _, r := range fs.Requirements() {
			if !slices.Contains(store.SelectableFields, r.Field) {
				return nil, errSelector("field_selector", fmt.Errorf("field %q is not supported: the supported fields are %s", r.Field, strings.Join(store.SelectableFields, ", ")))
			}
		}
		if !fs.Empty() {
			s.fields = fs
		}
	}
	if s.namespace == "" && s.labels == nil && s.fields == nil {
		return nil, nil
	}
	s.key = "ns=" + s.namespace
	if s.labels != nil {
		s.key += ";l=" + s.labels.String()
	}
	if s.fields != nil {
		s.key += ";f=" + s.fields.String()
	}
	return s, nil
}

// matches reports whether p is selected. It reads the labels and fields the
// store computed once for p's version: nothing is decoded.
func (s *selector) matches(p *store.Pod) bool {
	if s == nil {
		return true
	}
	if s.namespace != "" && p.Namespace != s.namespace {
		return false
	}
	if s.labels != nil && !s.labels.Matches(p.Labels()) {
		return false
	}
	return s.fields == nil || s.fields.Matches(p.Fields())
}

// cacheKey returns the key of the selection in the cache of lists.
func (s *selector) cacheKey() string {
	if s == nil {
		return ""
	}
	return s.key
}
