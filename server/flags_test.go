package server

import (
	"testing"

	"github.com/spf13/pflag"
)

// TestBoundFlagsZeroIsNoLimit: every bound of what clients hold at once
// means the same by 0 on the command line: no limit, never the default
// (nor "refuse everything"); left unset, its default.
func TestBoundFlagsZeroIsNoLimit(t *testing.T) {
	bounds := map[string]func(LimitsConfig) int{
		"max-connections":             func(l LimitsConfig) int { return l.MaxConnections },
		"max-pending-per-client":      func(l LimitsConfig) int { return l.MaxPendingPerClient },
		"max-watchers":                func(l LimitsConfig) int { return l.MaxWatchers },
		"max-watchers-per-client":     func(l LimitsConfig) int { return l.MaxWatchersPerClient },
		"max-find-waiters":            func(l LimitsConfig) int { return l.MaxFindWaiters },
		"max-find-waiters-per-client": func(l LimitsConfig) int { return l.MaxFindWaitersPerClient },
	}
	for name, get := range bounds {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				args      []string
				noLimit   bool
				wantValue int
			}{
				{args: []string{"--" + name + "=0"}, noLimit: true},
				{args: []string{"--" + name + "=-3"}, noLimit: true},
				{args: []string{"--" + name + "=7"}, wantValue: 7},
				{args: nil, wantValue: get(LimitsConfig{}.withDefaults())},
			} {
				var c Config
				fs := pflag.NewFlagSet("podsapi-server", pflag.ContinueOnError)
				c.AddFlags(fs)
				if err := fs.Parse(tc.args); err != nil {
					t.Fatal(err)
				}
				if err := c.Validate(); err != nil {
					t.Fatalf("%v: %v", tc.args, err)
				}
				got := get(c.Limits.withDefaults())
				if tc.noLimit && got >= 0 || !tc.noLimit && got != tc.wantValue {
					t.Errorf("%v: %d, want %v", tc.args, got, map[bool]any{true: "no limit (negative)", false: tc.wantValue}[tc.noLimit])
				}
			}
		})
	}
}
