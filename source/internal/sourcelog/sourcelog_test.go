package sourcelog_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/podsapi/podsapi/source/internal/sourcelog"
)

// TestWarn: a warning repeated 1,000 times is written once per reason and
// message every Interval, the next line saying how many were held back.
func TestWarn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		w := sourcelog.New(slog.New(slog.NewTextHandler(&buf, nil)))
		for range 1000 {
			w.Warn("protocol", "kubelet sent an event of unknown type: ignored", "event", "42")
			w.Warn("decode", "cannot decode a pod of the kubelet: skipped")
			w.Warn("protocol", "kubelet sent a pod without a UID: skipped")
		}
		if n := strings.Count(buf.String(), "\n"); n != 3 {
			t.Fatalf("%d lines for 3 (reason, message) pairs, want 3:\n%s", n, buf.String())
		}
		time.Sleep(sourcelog.Interval)
		buf.Reset()
		w.Warn("protocol", "kubelet sent an event of unknown type: ignored", "event", "42")
		if !strings.Contains(buf.String(), "reason=protocol suppressed=999") {
			t.Fatalf("the line after the interval does not report the 999 held back:\n%s", buf.String())
		}
	})
}
