package printer

import (
	"bytes"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// object returns pod as the generic JSON object kubectl prints: with
// apiVersion and kind, keys sorted.
func object(pod *corev1.Pod) (map[string]any, error) {
	p := *pod
	p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	return generic(&p)
}

// listObject returns pods as the List object kubectl prints.
func listObject(pods []*corev1.Pod) (map[string]any, error) {
	items := make([]any, 0, len(pods))
	for _, p := range pods {
		o, err := object(p)
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
