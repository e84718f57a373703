package budget

import (
	"math"
	"runtime/debug"
)

// Limit returns the runtime's soft memory limit in bytes, as Set or
// GOMEMLIMIT left it, or 0 when there is none.
func Limit() int64 {
	limit := debug.SetMemoryLimit(-1)
	if limit <= 0 || limit == math.MaxInt64 {
		return 0
	}
	return limit
}

// Share returns 1/divisor of limit, between floor and ceiling: the share of
// the memory limit one buffer of the process may take. A limit of 0 (none)
// gives ceiling.
func Share(limit int64, divisor, floor, ceiling int64) int64 {
	if limit <= 0 {
		return ceiling
	}
	return min(max(limit/divisor, floor), ceiling)
}
