package guard

import (
	"context"
	"errors"
	"testing"

	"connectrpc.com/connect"
	"golang.org/x/time/rate"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
)

// TestCancelledCallSpendsNoToken: a call the client reset before it reached
// the rate limit (Rapid Reset) does not take the token of the next one.
func TestCancelledCallSpendsNoToken(t *testing.T) {
	call := unaryChain(Guards{Limiter: rate.NewLimiter(0, 1)})
	req := connect.NewRequest(&podsv1alpha1.PodListRequest{})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for range 10 {
		if _, err := call(cancelled, req); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled call: %v, want context.Canceled", err)
		}
	}
	if _, err := call(context.Background(), req); err != nil {
		t.Fatalf("the call after 10 cancelled ones: %v, want the bucket's only token", err)
	}
}
