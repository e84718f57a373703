package harness

import (
	"fmt"
	"os"
	"testing"
)

// EnvResults is the environment variable naming the file to which Record
// appends its lines (make integrations sorts them into
// integrations/results.md, which docs/integrations.md embeds).
const EnvResults = "PODSAPI_INTEG_RESULTS"

// Record logs a measurement as a row of the results table: the agent, the
// way it ran (such as "direct" or "through podsapi") and what it cost; it
// appends the row to EnvResults's file when that is set.
func Record(t testing.TB, agent, way, cost string) {
	t.Helper()
	row := fmt.Sprintf("| %s | %s | %s |\n", agent, way, cost)
	t.Log(row)
	path := os.Getenv(EnvResults)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(row); err != nil {
		t.Fatal(err)
	}
}
