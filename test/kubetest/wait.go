package kubetest

import (
	"fmt"
	"testing"
	"time"
)

// Timeout bounds every wait of the rigs for a state the test does not
// drive: a process's start (the API server's takes about 4.5 s on an idle
// 2-core machine), an object's arrival at a client. It is generous, for a
// busy 2-core machine.
const Timeout = 2 * time.Minute

// PollInterval is how often a wait asks again.
const PollInterval = 50 * time.Millisecond

// Eventually calls cond every PollInterval until it returns nil, and fails
// the test, saying what it waited for and cond's last error, when Timeout
// passes.
func Eventually(t testing.TB, what string, cond func() error) {
	t.Helper()
	if err := poll(nil, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// poll calls cond every PollInterval until it returns nil, and returns
// nil; or an error that carries cond's last one when done is closed (the
// awaited process ended; nil: never) or when Timeout passes.
func poll(done <-chan struct{}, cond func() error) error {
	deadline := time.NewTimer(Timeout)
	defer deadline.Stop()
	ticker := time.NewTicker(PollInterval)
	defer ticker.Stop()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			// Asked once more: it may have become true as the process
			// ended, and the last error is then the one at its end.
			if err = cond(); err == nil {
				return nil
			}
			return fmt.Errorf("ended before it was ready; last: %w", err)
		case <-deadline.C:
			return fmt.Errorf("not within %v: %w", Timeout, err)
		case <-ticker.C: // Polls a state the test does not drive.
		}
	}
}
