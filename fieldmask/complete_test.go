package fieldmask_test

import (
	"slices"
	"testing"

	"github.com/podsapi/podsapi/fieldmask"
)

func TestComplete(t *testing.T) {
	for _, tc := range []struct {
		name, partial string
		want, not     []string
	}{
		{"TopLevel", "", []string{"metadata", "spec", "status"}, []string{"kind"}},
		{"Prefix", "metadata.na", []string{"metadata.name", "metadata.namespace"}, []string{"metadata.uid"}},
		{"JSONShape", "spec.volumes.empty", []string{"spec.volumes.emptyDir"}, nil},
		{"ProtoShape", "spec.volumes.volumeSource.empty", []string{"spec.volumes.volumeSource.emptyDir"}, nil},
		{"Repeated", "status.containerStatuses.rea", []string{"status.containerStatuses.ready"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fieldmask.Complete(tc.partial)
			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Errorf("Complete(%q) = %q, want it to hold %q", tc.partial, got, w)
				}
			}
			for _, n := range tc.not {
				if slices.Contains(got, n) {
					t.Errorf("Complete(%q) = %q, holds %q", tc.partial, got, n)
				}
			}
			for _, p := range got {
				if _, err := fieldmask.Parse(p); err != nil {
					t.Errorf("Complete(%q) offers %q, which does not parse: %v", tc.partial, p, err)
				}
			}
		})
	}
	for _, partial := range []string{"nope.x", "metadata.name.x", "metadata.labels.app"} {
		if got := fieldmask.Complete(partial); got != nil {
			t.Errorf("Complete(%q) = %q, want nil", partial, got)
		}
	}
}
