package e2enode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNormalizeConfig checks the one rewrite of a configuration that went
// through /configz: enforceNodeAllocatable [pods] without cgroupsPerQOS.
func TestNormalizeConfig(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"pods without cgroupsPerQOS", "cgroupsPerQOS: false\nenforceNodeAllocatable:\n- pods\n", "- none"},
		{"pods with cgroupsPerQOS", "cgroupsPerQOS: true\nenforceNodeAllocatable:\n- pods\n", "- pods"},
		{"none", "cgroupsPerQOS: false\nenforceNodeAllocatable:\n- none\n", "- none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "kubelet-config")
			if err := os.WriteFile(path, []byte(tc.in), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := normalizeConfig(path, t.Logf); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), "enforceNodeAllocatable:\n"+tc.want+"\n") {
				t.Errorf("got %q, want enforceNodeAllocatable %s", b, tc.want)
			}
		})
	}
}
