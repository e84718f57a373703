package budget

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
)

// DefaultGCPercent is the garbage collector's target the server runs with
// unless GOGC is set: the heap may grow by half its live size between
// collections, not by all of it. The server allocates little per call or
// event (its answers are cached bytes), so collecting twice as often costs
// no CPU that the benchmarks could tell, and keeps less garbage resident:
// with 100 watchers and 1,000 changes a second, RSS 111 MiB instead of
// 133 MiB (GOGC=100) or 178 MiB (GOGC=200), at 6.3 to 6.7 µs of server CPU
// per event against 7.1 to 7.3 (`go run ./test/cmd/bench --only watch,storm,idle
// --watchers 100 --ours-env GOGC=N`, docs/benchmarks.md). Idle memory does
// not change: it is live, not garbage.
const DefaultGCPercent = 50

// SetGCPercent sets the garbage collector's target to percent, unless the
// GOGC environment variable is set (the operator's choice wins), and
// reports whether it did.
func SetGCPercent(percent int) bool {
	if os.Getenv("GOGC") != "" {
		return false
	}
	debug.SetGCPercent(percent)
	return true
}

// GCPercent returns the garbage collector's target, for logs.
func GCPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}
