package fieldmask_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/podsapi/podsapi/fieldmask"
)

func TestParseErrors(t *testing.T) {
	long := strings.Repeat("a", fieldmask.MaxPathLength+1)
	tooMany := slices.Repeat([]string{"metadata.name"}, fieldmask.MaxPaths+1)
	tests := []struct {
		name  string
		paths []string
		want  string
	}{
		{"no paths", nil, "field mask has no paths; send no mask to get the whole pod"},
		{"empty path", []string{""}, `invalid field mask path "": the path is empty`},
		{"leading dot", []string{".status"}, `invalid field mask path ".status": empty field name at the start`},
		{"lone dot", []string{"."}, `invalid field mask path ".": empty field name at the start`},
		{"double dot", []string{"status..phase"}, `invalid field mask path "status..phase": empty field name after "status."`},
		{"trailing dot", []string{"status."}, `invalid field mask path "status.": empty field name after "status."`},
		{"trailing dot after scalar", []string{"metadata.name."}, `invalid field mask path "metadata.name.": empty field name after "metadata.name."`},
		{"trailing dot after map", []string{"metadata.labels."}, `invalid field mask path "metadata.labels.": empty field name after "metadata.labels."`},
		{"unknown top-level field", []string{"foo"}, `invalid field mask path "foo": k8s.io.api.core.v1.Pod has no field "foo"`},
		{"unknown nested field", []string{"status.fooBar"}, `invalid field mask path "status.fooBar": k8s.io.api.core.v1.PodStatus has no field "fooBar"`},
		{"unknown field below repeated message", []string{"status.containerStatuses.bogus"},
			`invalid field mask path "status.containerStatuses.bogus": k8s.io.api.core.v1.ContainerStatus has no field "bogus"`},
		{"names are case-sensitive", []string{"Metadata"}, `invalid field mask path "Metadata": k8s.io.api.core.v1.Pod has no field "Metadata"; did you mean "metadata"?`},
		{"snake case is not a field name", []string{"status.pod_ips"}, `invalid field mask path "status.pod_ips": k8s.io.api.core.v1.PodStatus has no field "pod_ips"; did you mean "status.podIPs"?`},
		{"paths are not trimmed", []string{" metadata"}, `invalid field mask path " metadata": k8s.io.api.core.v1.Pod has no field " metadata"; did you mean "metadata"?`},
		{"below a string", []string{"metadata.name.first"},
			`invalid field mask path "metadata.name.first": field "name" of k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta is a string and has no fields (select "metadata.name")`},
		{"below a repeated string", []string{"spec.containers.args.x"},
			`invalid field mask path "spec.containers.args.x": field "args" of k8s.io.api.core.v1.Container is a repeated string and has no fields (select "spec.containers.args")`},
		{"below an int32", []string{"status.containerStatuses.restartCount.x"},
			`invalid field mask path "status.containerStatuses.restartCount.x": field "restartCount" of k8s.io.api.core.v1.ContainerStatus is an int32 and has no fields (select "status.containerStatuses.restartCount")`},
		{"below a bool", []string{"status.containerStatuses.ready.really"},
			`invalid field mask path "status.containerStatuses.ready.really": field "ready" of k8s.io.api.core.v1.ContainerStatus is a bool and has no fields (select "status.containerStatuses.ready")`},
		{"below a map", []string{"metadata.labels.app"},
			`invalid field mask path "metadata.labels.app": field "labels" of k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta is a map; a mask selects a whole map ("metadata.labels"), not its entries`},
		{"below a map of messages", []string{"spec.containers.resources.limits.cpu"},
			`invalid field mask path "spec.containers.resources.limits.cpu": field "limits" of k8s.io.api.core.v1.ResourceRequirements is a map; a mask selects a whole map ("spec.containers.resources.limits"), not its entries`},
		{"subsumed paths are still validated", []string{"metadata", "metadata.bogus"},
			`invalid field mask path "metadata.bogus": k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta has no field "bogus"`},
		{"first bad path is named", []string{"status.phase", "spec.nodeName", "spec.nodname", "also.bad"},
			`invalid field mask path "spec.nodname": k8s.io.api.core.v1.PodSpec has no field "nodname"; did you mean "spec.nodeName"?`},
		{"path too long", []string{long},
			`invalid field mask path "` + long[:64] + `..." (1025 bytes): a path is at most 1024 bytes`},
		{"path at the length limit is checked as usual, and not quoted in full", []string{long[:fieldmask.MaxPathLength]},
			`invalid field mask path "` + long[:128] + `...": k8s.io.api.core.v1.Pod has no field "` + long[:64] + `..."`},
		{"too many paths", tooMany, "field mask has 257 paths; at most 256 are allowed"},
		{"invalid UTF-8 is quoted", []string{"status.\xff"}, `invalid field mask path "status.\xff": k8s.io.api.core.v1.PodStatus has no field "\xff"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := fieldmask.Parse(tt.paths...)
			if err == nil {
				t.Fatalf("Parse(%q) = %v, want error %q", tt.paths, m, tt.want)
			}
			if m != nil {
				t.Errorf("Parse(%q) returned a mask with its error", tt.paths)
			}
			if err.Error() != tt.want {
				t.Errorf("Parse(%q) error:\n got %s\nwant %s", tt.paths, err, tt.want)
			}
		})
	}
}

func TestParseNormalizes(t *testing.T) {
	tests := []struct {
		name  string
		paths []string
		want  []string
	}{
		{"single", []string{"status.phase"}, []string{"status.phase"}},
		{"sorted", []string{"status.podIPs", "metadata.uid", "metadata.name"}, []string{"metadata.name", "metadata.uid", "status.podIPs"}},
		{"duplicates", []string{"status.phase", "status.phase", "status.phase"}, []string{"status.phase"}},
		{"parent after child", []string{"metadata.name", "metadata"}, []string{"metadata"}},
		{"parent before child", []string{"metadata", "metadata.name", "metadata.ownerReferences.uid"}, []string{"metadata"}},
		{"deep child subsumed", []string{"status.containerStatuses.state.terminated.exitCode", "status.containerStatuses"}, []string{"status.containerStatuses"}},
		{"siblings kept", []string{"status.containerStatuses.state.terminated.exitCode", "status.containerStatuses.ready"},
			[]string{"status.containerStatuses.ready", "status.containerStatuses.state.terminated.exitCode"}},
		{"whole map", []string{"metadata.labels"}, []string{"metadata.labels"}},
		{"exactly the path limit", slices.Repeat([]string{"spec.nodeName"}, fieldmask.MaxPaths), []string{"spec.nodeName"}},
		{"everything", []string{"status", "spec", "metadata", "spec.nodeName"}, []string{"metadata", "spec", "status"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := fieldmask.Parse(tt.paths...)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.paths, err)
			}
			if got := m.Paths(); !slices.Equal(got, tt.want) {
				t.Errorf("Paths() = %q, want %q", got, tt.want)
			}
			if got, want := m.Key(), strings.Join(tt.want, ","); got != want {
				t.Errorf("Key() = %q, want %q", got, want)
			}
			if got, want := m.String(), strings.Join(tt.want, ","); got != want {
				t.Errorf("String() = %q, want %q", got, want)
			}
			// The normalized paths parse back to the same mask.
			again, err := fieldmask.Parse(m.Paths()...)
			if err != nil || again.Key() != m.Key() {
				t.Errorf("Parse(Paths()) = %v, %v; want key %q", again, err, m.Key())
			}
		})
	}
}

func TestKeyEquality(t *testing.T) {
	tests := []struct {
		name  string
		a, b  []string
		equal bool
	}{
		{"permutation", []string{"metadata.name", "status.phase", "spec.nodeName"}, []string{"spec.nodeName", "metadata.name", "status.phase"}, true},
		{"duplicates", []string{"status.phase"}, []string{"status.phase", "status.phase"}, true},
		{"subsumed child", []string{"metadata"}, []string{"metadata.uid", "metadata"}, true},
		{"different", []string{"metadata.name"}, []string{"metadata.uid"}, false},
		{"parent versus child", []string{"metadata"}, []string{"metadata.name"}, false},
		{"superset", []string{"metadata.name"}, []string{"metadata.name", "metadata.uid"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := fieldmask.Parse(tt.a...)
			if err != nil {
				t.Fatal(err)
			}
			b, err := fieldmask.Parse(tt.b...)
			if err != nil {
				t.Fatal(err)
			}
			if got := a.Key() == b.Key(); got != tt.equal {
				t.Errorf("Key(%q) = %q, Key(%q) = %q; equal = %v, want %v", tt.a, a.Key(), tt.b, b.Key(), got, tt.equal)
			}
		})
	}
}

func TestUnion(t *testing.T) {
	identity := []string{"metadata.namespace", "metadata.name", "metadata.uid"}
	tests := []struct {
		name    string
		base    []string // nil for the nil mask
		add     []string
		want    []string // nil for the nil mask
		wantErr string
	}{
		{"adds identity to a watch mask", []string{"status.phase"}, identity,
			[]string{"metadata.name", "metadata.namespace", "metadata.uid", "status.phase"}, ""},
		{"already subsumed", []string{"metadata"}, identity, []string{"metadata"}, ""},
		{"subsumes the base", []string{"metadata.name", "metadata.labels"}, []string{"metadata"}, []string{"metadata"}, ""},
		{"nothing added", []string{"status.phase"}, nil, []string{"status.phase"}, ""},
		{"nil stays nil", nil, identity, nil, ""},
		{"nil with nothing added", nil, nil, nil, ""},
		{"invalid path", []string{"status.phase"}, []string{"metadata.nme"}, nil,
			`invalid field mask path "metadata.nme": k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta has no field "nme"; did you mean "metadata.name"?`},
		{"invalid path on nil", nil, []string{"status.phse"}, nil,
			`invalid field mask path "status.phse": k8s.io.api.core.v1.PodStatus has no field "phse"; did you mean "status.phase"?`},
		{"limit counts added paths only", slices.Repeat([]string{"status.phase"}, 200), slices.Repeat([]string{"spec.nodeName"}, fieldmask.MaxPaths),
			[]string{"spec.nodeName", "status.phase"}, ""},
		{"too many added paths", []string{"status.phase"}, slices.Repeat([]string{"spec.nodeName"}, fieldmask.MaxPaths+1), nil,
			"field mask has 257 paths; at most 256 are allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var base *fieldmask.Mask
			if tt.base != nil {
				var err error
				if base, err = fieldmask.Parse(tt.base...); err != nil {
					t.Fatal(err)
				}
			}
			baseKey := base.Key()
			got, err := base.Union(tt.add...)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Union(%q) = %v, %v; want error %q", tt.add, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Union(%q): %v", tt.add, err)
			}
			if tt.want == nil {
				if got != nil {
					t.Fatalf("Union(%q) = %v, want the nil mask", tt.add, got)
				}
			} else if !slices.Equal(got.Paths(), tt.want) {
				t.Errorf("Union(%q).Paths() = %q, want %q", tt.add, got.Paths(), tt.want)
			}
			if base.Key() != baseKey {
				t.Errorf("Union modified its receiver: key %q, was %q", base.Key(), baseKey)
			}
		})
	}
}

func TestNilMask(t *testing.T) {
	var m *fieldmask.Mask
	if got := m.Paths(); got != nil {
		t.Errorf("Paths() = %q, want nil", got)
	}
	if got := m.Key(); got != "" {
		t.Errorf("Key() = %q, want empty", got)
	}
	if got := m.String(); got != "(whole pod)" {
		t.Errorf("String() = %q", got)
	}
	src := []byte{0x0a, 0x00, 0xff} // malformed on purpose: the nil mask copies without reading
	out, err := m.AppendProjection([]byte("dst:"), src)
	if err != nil || string(out) != "dst:"+string(src) {
		t.Errorf("AppendProjection = %q, %v; want %q", out, err, "dst:"+string(src))
	}
}

func TestPathsReturnsACopy(t *testing.T) {
	m, err := fieldmask.Parse("metadata.name", "status.phase")
	if err != nil {
		t.Fatal(err)
	}
	p := m.Paths()
	p[0] = "spec"
	if got := m.Paths(); got[0] != "metadata.name" {
		t.Errorf("modifying Paths() changed the mask: %q", got)
	}
}
