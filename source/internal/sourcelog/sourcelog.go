// Package sourcelog writes the warnings a pod source logs about what its
// upstream sends, at most one line per reason and message every Interval,
// so that an upstream repeating a fault cannot flood the log: the lines it
// holds back are counted, and reported as suppressed=N by the next line
// written for the same reason and message. The errors themselves are still
// counted, each one, by the source's metrics.
package sourcelog

import (
	"log/slog"
	"time"

	"github.com/podsapi/podsapi/internal/loglimit"
)

// Interval is how often the same warning of one source is written at most:
// as often as the peer guard writes the same warning about one client.
const Interval = 10 * time.Second

// Warner writes the rate-limited warnings of one source.
type Warner struct {
	log   *slog.Logger
	limit *loglimit.Limiter[key]
}

type key struct{ reason, msg string }

// New returns a Warner writing to log.
func New(log *slog.Logger) *Warner {
	return &Warner{log: log, limit: loglimit.New[key](Interval)}
}

// Warn logs msg at WARN level with args and reason=reason, unless a line
// with the same reason and message was written less than Interval ago.
// reason is the reason label the source counts the error under; msg should
// be a constant, with the details in args.
func (w *Warner) Warn(reason, msg string, args ...any) {
	ok, suppressed := w.limit.Allow(key{reason, msg})
	if !ok {
		return
	}
	args = append(args, "reason", reason)
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	w.log.Warn(msg, args...)
}
