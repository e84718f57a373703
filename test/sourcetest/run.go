package sourcetest

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Run runs a pod source's Run function in the background until the end of
// the test, then checks that it returns nil within WaitBound of its
// context being cancelled.
func Run(t testing.TB, run func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		bound := WaitBound(t)
		timer := time.NewTimer(bound)
		defer timer.Stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v after cancel, want nil", err)
			}
		case <-timer.C:
			t.Errorf("Run did not return within %v of cancel", bound)
		}
	})
}

// SourceErrors returns podsapi_source_errors_total of source for reason in
// reg, failing the test when it is not exported.
func SourceErrors(t testing.TB, reg prometheus.Gatherer, source, reason string) float64 {
	t.Helper()
	v, ok := MetricValue(t, reg, "podsapi_source_errors_total", map[string]string{"source": source, "reason": reason})
	if !ok {
		t.Fatalf("podsapi_source_errors_total{source=%q,reason=%q} is not exported", source, reason)
	}
	return v
}
