package nri_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	clog "github.com/containerd/log"

	"github.com/podsapi/podsapi/nri"
)

// syncBuffer is a buffer written by several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRouteLogs logs as ttrpc does (github.com/containerd/log, on logrus's
// standard logger) and finds the lines in the server's slog logger, as
// warnings, bounded, and nothing on logrus's own output.
func TestRouteLogs(t *testing.T) {
	var buf syncBuffer
	stop := nri.RouteLogs(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(stop)
	ctx := context.Background()

	cases := []struct {
		name string
		log  func()
		want []string
		max  int // bytes of the line
	}{
		{
			name: "an error of ttrpc",
			log: func() {
				clog.G(ctx).WithField("stream", 7).Error("ttrpc: received message on inactive stream")
			},
			want: []string{`level=WARN`, `msg="nri: ttrpc: received message on inactive stream"`, `stream=7`},
		},
		{
			name: "information is debug",
			log:  func() { clog.G(ctx).Info("plugin connected") },
			want: []string{`level=DEBUG`, `msg="nri: plugin connected"`},
		},
		{
			name: "a huge message and many fields are bounded",
			log: func() {
				fields := clog.Fields{}
				for i := range 100 {
					fields[strings.Repeat("k", 10)+string(rune('a'+i%26))+strings.Repeat("z", i)] = strings.Repeat("v", 10000)
				}
				clog.G(ctx).WithFields(fields).Error(strings.Repeat("x", 1<<20))
			},
			want: []string{`level=WARN`, `msg="nri: xxxx`},
			max:  8 << 10,
		},
	}
	t.Cleanup(func() {
		// Stopped, the routing drops the lines.
		stop()
		before := len(buf.String())
		clog.G(ctx).Error("after the end")
		if got := buf.String()[before:]; got != "" {
			t.Errorf("logged after RouteLogs was stopped: %q", got)
		}
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(buf.String())
			tc.log()
			line := buf.String()[before:]
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("the logged line %.300q lacks %q", line, w)
				}
			}
			if tc.max > 0 && len(line) > tc.max {
				t.Errorf("the logged line has %d bytes, want at most %d", len(line), tc.max)
			}
		})
	}
}
