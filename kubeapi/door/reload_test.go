package door

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"
)

// A reloaded value follows its file within reloadInterval, and keeps the
// last good value while the file does not parse.
func TestReloaded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "v")
		write := func(s string, mod time.Time) {
			if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
				t.Fatal(err)
			}
			// The fake clock stands still: give each version its own
			// modification time, as rotated files have.
			if err := os.Chtimes(path, mod, mod); err != nil {
				t.Fatal(err)
			}
		}
		parse := func(data [][]byte) (string, error) {
			if string(data[0]) == "bad" {
				return "", errors.New("bad")
			}
			return string(data[0]), nil
		}
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		write("one", base)
		r, err := newReloaded(parse, path)
		if err != nil {
			t.Fatal(err)
		}
		for _, step := range []struct {
			write, want string
			wait        time.Duration
		}{
			{"two", "one", 0},                  // Not looked at yet.
			{"", "two", reloadInterval},        // Looked at: changed.
			{"bad", "two", reloadInterval},     // Does not parse: the last good value.
			{"three", "three", reloadInterval}, // Parses again.
		} {
			if step.write != "" {
				base = base.Add(time.Minute)
				write(step.write, base)
			}
			time.Sleep(step.wait)
			if got := r.get(); got != step.want {
				t.Fatalf("after writing %q and %v: %q, want %q", step.write, step.wait, got, step.want)
			}
		}
		if _, err := newReloaded(parse, filepath.Join(t.TempDir(), "absent")); err == nil {
			t.Fatal("a missing file loaded")
		}
	})
}
