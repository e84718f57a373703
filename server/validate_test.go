package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/podsapi/podsapi/server"
)

// TestValidate: an invalid combination of settings gets every error in one
// message, each naming its flag, from server.New as from the command line.
func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		cfg  server.Config
		want []string
	}{
		{"zero", server.Config{}, nil},
		{"one", server.Config{Limits: server.LimitsConfig{Burst: -1}}, []string{"--burst must not be negative"}},
		{"every kind at once", server.Config{
			Socket:    "/" + strings.Repeat("s", 200),
			Limits:    server.LimitsConfig{Burst: -1, MaxStreams: -2},
			Watch:     server.WatchConfig{Queue: -3, ProgressInterval: time.Millisecond},
			Transport: server.TransportConfig{ShutdownTimeout: -time.Second},
		}, []string{
			"--burst must not be negative", "--max-streams must not be negative", "--watch-queue must not be negative",
			"--shutdown-timeout must not be negative", "--socket /sss", "--watch-progress-interval 1ms is below its minimum",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate = nil, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate = %q: it does not say %q", err, w)
				}
			}
			if n := strings.Count(err.Error(), "\n") + 1; n != len(tc.want) {
				t.Errorf("Validate said %d errors, want %d: %q", n, len(tc.want), err)
			}
			if _, nerr := server.New(nil, tc.cfg); nerr == nil || nerr.Error() != err.Error() {
				t.Errorf("server.New = %v, want Validate's error", nerr)
			}
		})
	}
}
