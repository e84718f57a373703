package manifest

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecodeFile decodes arbitrary manifest files, as YAML or JSON by name.
// decodeFile must never panic; a file it accepts yields pods that the store
// can serve: named, namespaced, with a UID, on the node, and encodable.
func FuzzDecodeFile(f *testing.F) {
	examples, _ := filepath.Glob("../../examples/manifests/*")
	for _, p := range examples {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(isJSONName(p), data)
		}
	}
	for _, s := range []string{
		"", "---", "--- \n---\n", "# only a comment\n", "null", "{}", "[]", "apiVersion: v1\nkind: Pod\n",
		"apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n",
		"apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  name: b\n",
		"apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\nspec:\n  containers: [{name: c, image: i}]\nstatus: {phase: Running}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b, namespace: x}\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: &a x, labels: {a: *a}}\n",
		"apiVersion: v2\nkind: Pod\n", "apiVersion: v1\nkind: Service\nmetadata: {name: a}\n",
		"a: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, resources: {limits: {cpu: 1e999999}}}]}\n",
		"\xef\xbb\xbfapiVersion: v1\nkind: Pod\nmetadata: {name: a}\n", "\t\x00\xff",
	} {
		f.Add(false, []byte(s))
	}
	f.Add(true, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","uid":"u"}}`))
	f.Add(true, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"}}{"x":1}`))
	f.Add(true, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","creationTimestamp":"not a time"}}`))
	f.Fuzz(func(t *testing.T, json bool, data []byte) {
		name := "fuzz.yaml"
		if json {
			name = "fuzz.json"
		}
		pods, err := decodeFile(name, data, "node-1", DefaultMaxFileBytes)
		if err != nil {
			if reasonOf(err) == "" {
				t.Fatalf("rejection without a reason: %v", err)
			}
			return
		}
		for _, p := range pods {
			if p.Name == "" || p.Namespace == "" || p.UID == "" || p.Spec.NodeName != "node-1" {
				t.Fatalf("accepted an incomplete pod: name %q namespace %q uid %q node %q", p.Name, p.Namespace, p.UID, p.Spec.NodeName)
			}
			if _, err := p.Marshal(); err != nil {
				t.Fatalf("accepted a pod that does not encode: %v", err)
			}
		}
	})
}
