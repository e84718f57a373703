package fieldmask_test

import (
	"slices"
	"testing"

	"github.com/podsapi/podsapi/fieldmask"
)

func TestJSONPaths(t *testing.T) {
	for _, tc := range []struct {
		name  string
		paths []string
		want  []string
	}{
		{"plain", []string{"status.containerStatuses.ready", "metadata.name"}, []string{"metadata.name", "status.containerStatuses.ready"}},
		{"json shape kept", []string{"spec.volumes.emptyDir"}, []string{"spec.volumes.emptyDir"}},
		{"proto shape inlined", []string{"spec.volumes.volumeSource.emptyDir"}, []string{"spec.volumes.emptyDir"}},
		{"probe handler", []string{"spec.containers.livenessProbe.handler.httpGet"}, []string{"spec.containers.livenessProbe.httpGet"}},
		{"whole map", []string{"metadata.labels"}, []string{"metadata.labels"}},
		{"overlap", []string{"metadata", "metadata.name"}, []string{"metadata"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := fieldmask.Parse(tc.paths...)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.JSONPaths(); !slices.Equal(got, tc.want) {
				t.Errorf("JSONPaths of %q = %q, want %q", tc.paths, got, tc.want)
			}
		})
	}
	m, err := fieldmask.Parse("spec.volumes.volumeSource")
	if err != nil {
		t.Fatal(err)
	}
	got := m.JSONPaths()
	if !slices.Contains(got, "spec.volumes.emptyDir") || !slices.Contains(got, "spec.volumes.hostPath") || slices.Contains(got, "spec.volumes.volumeSource") {
		t.Errorf("JSONPaths of a whole embedded struct = %q, want its inlined fields", got)
	}
	if (*fieldmask.Mask)(nil).JSONPaths() != nil {
		t.Error("JSONPaths of the nil mask is not nil")
	}
}
