package printer

import (
	"bytes"
	"encoding/json"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// object returns pod as the generic JSON object kubectl prints: with
// apiVersion and kind, keys sorted; with keep, only the paths it holds
// (and apiVersion and kind).
func object(pod *corev1.Pod, keep pathTree) (map[string]any, error) {
	p := *pod
	p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	o, err := generic(&p)
	if err != nil || keep == nil {
		return o, err
	}
	prune(o, keep)
	return o, nil
}

// listObject returns pods as the List object kubectl prints.
func listObject(pods []*corev1.Pod, keep pathTree) (map[string]any, error) {
	items := make([]any, 0, len(pods))
	for _, p := range pods {
		o, err := object(p, keep)
		if err != nil {
			return nil, err
		}
		items = append(items, o)
	}
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "List",
		"items":      items,
		"metadata":   map[string]any{"resourceVersion": ""},
	}, nil
}

// generic returns v as a JSON object of maps, whose keys encoding/json
// sorts, keeping numbers exact.
func generic(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	pruneNulls(m)
	return m, nil
}

// pruneNulls removes the null values of m and of the objects it holds:
// k8s.io/api writes null for unset fields without omitempty (such as
// spec.containers), which field masks leave unset.
func pruneNulls(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if e == nil {
				delete(v, k)
			} else {
				pruneNulls(e)
			}
		}
	case []any:
		for _, e := range v {
			pruneNulls(e)
		}
	}
}

// marshalJSON returns v as kubectl prints JSON: indented by four spaces.
func marshalJSON(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "    ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// marshalYAML returns v as YAML.
func marshalYAML(v any) ([]byte, error) {
	return yaml.Marshal(v)
}

// pathTree is a tree of the JSON names of the fields to keep: a nil
// subtree keeps the whole value.
type pathTree map[string]pathTree

// newPathTree returns the tree of the dotted paths, which keeps apiVersion
// and kind too, or nil (keep everything) for no paths.
func newPathTree(paths []string) pathTree {
	if len(paths) == 0 {
		return nil
	}
	t := pathTree{"apiVersion": nil, "kind": nil}
	for _, p := range paths {
		node := t
		names := strings.Split(p, ".")
		for i, n := range names {
			sub, seen := node[n]
			if seen && sub == nil {
				break // a shorter path keeps all of it
			}
			if i == len(names)-1 {
				node[n] = nil
				break
			}
			if sub == nil {
				sub = pathTree{}
				node[n] = sub
			}
			node = sub
		}
	}
	return t
}

// prune removes from v the fields t does not hold, in every element of
// lists; a value that is not an object (a time, a quantity) is kept whole.
func prune(v any, t pathTree) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			sub, ok := t[k]
			switch {
			case !ok:
				delete(v, k)
			case sub != nil:
				prune(e, sub)
			}
		}
	case []any:
		for _, e := range v {
			prune(e, t)
		}
	}
}
