package guard_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/podsapi/podsapi/guard"
)

// TestLogLimiter: a peer's repeated warning is written once per interval,
// for each UID and message.
func TestLogLimiter(t *testing.T) {
	var buf bytes.Buffer
	l := guard.NewLogLimiter(slog.New(slog.NewTextHandler(&buf, nil)), time.Hour)
	a := &guard.Peer{Known: true, UID: 65534}
	b := &guard.Peer{Known: true, UID: 1000}
	for range 1000 {
		l.Warn(a, "denied")
		l.Warn(b, "denied")
		l.Warn(a, "flood")
		l.Warn(nil, "denied")
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines for 4 (UID, message) pairs, want 4:\n%s", len(lines), buf.String())
	}
	for _, want := range []string{`msg=denied uid=65534`, `msg=denied uid=1000`, `msg=flood uid=65534`, `msg=denied peer=unknown`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("no line with %q:\n%s", want, buf.String())
		}
	}
}
