package manifest_test

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/podsapi/podsapi/source/internal/sourcelog"
	"github.com/podsapi/podsapi/source/manifest"
	"github.com/podsapi/podsapi/test/sourcetest"
)

// TestManyBadFilesLogged: a directory of 500 manifests that do not decode,
// beside a good one, has each counted, and at most one warning written per
// reason every sourcelog.Interval (before: one line per file, and one per
// rewrite of a file).
func TestManyBadFilesLogged(t *testing.T) {
	const n = 500
	dir := t.TempDir()
	files := map[string]string{"good.yaml": podYAML("default", "good", "", "nginx")}
	for i := range n {
		files[fmt.Sprintf("bad-%03d.yaml", i)] = "kind: Pod\nmetadata: [not, a, map\n"
	}
	writeFiles(t, dir, files)
	logs := sourcetest.NewLogs(t)
	began := time.Now()
	h := start(t, dir, manifest.WithLogger(logs.Logger()))
	allowed := 1 + int(time.Since(began)/sourcelog.Interval)
	if got := h.errors("decode"); got != n {
		t.Errorf(`podsapi_manifest_errors_total{reason="decode"} = %v, want %d: every file counted`, got, n)
	}
	if got := logs.Count(slog.LevelWarn, "skipping manifest file"); got < 1 || got > allowed {
		t.Errorf("%d warnings for %d bad files, want 1 to %d", got, n, allowed)
	}
}
