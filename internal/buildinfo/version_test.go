package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	for _, tc := range []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"go install of a tag", debug.BuildInfo{Main: debug.Module{Version: "v0.1.0"}}, "v0.1.0"},
		{"checkout, pseudo-version", debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261201130314-dd7b2f1a2b3c+dirty"}}, "v0.0.0-20261201130314-dd7b2f1a2b3c+dirty"},
		{"devel with a commit", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "dd7b2f1a2b3c4d5e6f"}, {Key: "vcs.modified", Value: "false"}}}, "devel-dd7b2f1a2b3c"},
		{"devel, modified", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "true"}}}, "devel-abc-dirty"},
		{"nothing recorded", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fromBuildInfo(&tc.bi); got != tc.want {
				t.Errorf("fromBuildInfo = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestStampedWins(t *testing.T) {
	old := Version
	t.Cleanup(func() { Version = old })
	Version = "v9.9.9-test"
	if got := Get(); got != "v9.9.9-test" {
		t.Errorf("Get = %q, want the stamped version", got)
	}
	if s := String("podsctl"); !strings.HasPrefix(s, "podsctl v9.9.9-test (go") {
		t.Errorf("String = %q", s)
	}
}
