package sourcetest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// Logs is a slog.Handler that keeps the messages of every record, at every
// level, and lets a test wait for them. It is safe for concurrent use. Make
// one with NewLogs.
type Logs struct {
	t     testing.TB
	state *logState
	attrs []slog.Attr
}

type logState struct {
	mu      sync.Mutex
	records []string // "LEVEL message".
	changed chan struct{}
}

// NewLogs returns an empty Logs that also writes every record to the
// test's log.
func NewLogs(t testing.TB) *Logs {
	return &Logs{t: t, state: &logState{changed: make(chan struct{})}}
}

// Logger returns a logger that writes to l.
func (l *Logs) Logger() *slog.Logger { return slog.New(l) }

// Enabled reports true for every level.
func (l *Logs) Enabled(context.Context, slog.Level) bool { return true }

// Handle keeps the record.
func (l *Logs) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	for _, a := range l.attrs {
		fmt.Fprintf(&b, " %s", a)
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s", a)
		return true
	})
	l.t.Logf("%s %s%s", r.Level, r.Message, b.String())
	s := l.state
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = append(s.records, r.Level.String()+" "+r.Message)
	close(s.changed)
	s.changed = make(chan struct{})
	return nil
}

// WithAttrs returns a handler that adds attrs to each record.
func (l *Logs) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Logs{t: l.t, state: l.state, attrs: append(append([]slog.Attr(nil), l.attrs...), attrs...)}
}

// WithGroup returns l: groups are not kept.
func (l *Logs) WithGroup(string) slog.Handler { return l }

// Count returns how many records have the level and a message that
// contains substr.
func (l *Logs) Count(level slog.Level, substr string) int {
	s := l.state
	s.mu.Lock()
	defer s.mu.Unlock()
	return count(s.records, level, substr)
}

func count(records []string, level slog.Level, substr string) int {
	n := 0
	prefix := level.String() + " "
	for _, r := range records {
		if strings.HasPrefix(r, prefix) && strings.Contains(r, substr) {
			n++
		}
	}
	return n
}

// Wait waits up to WaitBound until at least n records have the level and
// a message that contains substr, and fails the test otherwise.
func (l *Logs) Wait(level slog.Level, substr string, n int) {
	l.t.Helper()
	bound := WaitBound(l.t)
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	s := l.state
	for {
		s.mu.Lock()
		got, changed := count(s.records, level, substr), s.changed
		s.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			l.t.Fatalf("timed out after %v waiting for %d %s logs containing %q; got %d", bound, n, level, substr, got)
		}
	}
}
