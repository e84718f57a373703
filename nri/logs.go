package nri

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/sirupsen/logrus"
)

// Bounds of what RouteLogs passes on of one logrus entry.
const (
	maxLogMessage = 1 << 10
	maxLogFields  = 8
	maxLogValue   = 256
)

var (
	routeOnce sync.Once
	routed    atomic.Pointer[slog.Logger]
)

// RouteLogs sends what NRI's libraries log through logrus's standard
// logger to l, until the returned function is called: ttrpc logs there (by
// way of github.com/containerd/log), and so do NRI's packages unless given
// a logger (github.com/containerd/nri/pkg/log's fallback), as text lines on
// stderr otherwise. Errors and warnings (a runtime's garbage on the socket,
// a dropped stream) become warnings of l, information its debug; each
// message, prefixed "nri: ", is bounded in length and in fields. The
// standard logger's own output is discarded from the first call on. The
// last call's l is the one used; once it is stopped, the lines are
// dropped. Observer.Run routes them to its logger while it runs.
func RouteLogs(l *slog.Logger) (stop func()) {
	routed.Store(l)
	routeOnce.Do(func() {
		std := logrus.StandardLogger()
		std.SetOutput(io.Discard)
		std.AddHook(slogHook{})
	})
	return func() { routed.CompareAndSwap(l, nil) }
}

// slogHook hands logrus's entries to the routed logger.
type slogHook struct{}

func (slogHook) Levels() []logrus.Level { return logrus.AllLevels }

func (slogHook) Fire(e *logrus.Entry) error {
	l := routed.Load()
	if l == nil {
		return nil
	}
	level := slog.LevelDebug
	if e.Level <= logrus.WarnLevel {
		level = slog.LevelWarn
	}
	ctx := context.Background()
	if !l.Enabled(ctx, level) {
		return nil
	}
	attrs := make([]slog.Attr, 0, min(len(e.Data), maxLogFields))
	for k, v := range e.Data {
		if len(attrs) == maxLogFields {
			break
		}
		attrs = append(attrs, slog.String(bound(k, maxLogValue), bound(fmt.Sprint(v), maxLogValue)))
	}
	l.LogAttrs(ctx, level, "nri: "+bound(e.Message, maxLogMessage), attrs...)
	return nil
}

// bound cuts s to at most n bytes, marking the cut.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
