package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/podsapi/podsapi/store"
)

// TestStoreErrorsRateLimited: a source sending oversized pods endlessly
// gets one warning (the store counts every pod), and other errors of the
// store still get theirs.
func TestStoreErrorsRateLimited(t *testing.T) {
	var logs syncBuffer
	handle := storeErrors(slog.New(slog.NewTextHandler(&logs, nil)))
	for i := range 1000 {
		handle(fmt.Errorf("pod ns/p%d: %w", i, store.ErrPodTooLarge))
		handle(errors.New("encode pod: broken"))
	}
	out := logs.String()
	if n := strings.Count(out, "refused a pod larger than --max-pod-bytes"); n != 1 {
		t.Errorf("%d warnings for 1,000 oversized pods, want 1:\n%s", n, out)
	}
	if n := strings.Count(out, "cannot store pod"); n != 1 {
		t.Errorf("%d errors for 1,000 encoding errors, want 1:\n%s", n, out)
	}
}
