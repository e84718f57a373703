package guard_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"connectrpc.com/connect"

	"github.com/podsapi/podsapi/errinfo"
	"github.com/podsapi/podsapi/guard"
	"github.com/podsapi/podsapi/internal/admit"
)

// fakeStream is the handler side of a watch whose messages go nowhere.
type fakeStream struct{ connect.StreamingHandlerConn }

func (fakeStream) Send(any) error { return nil }

// TestWatchRefusalsTarpitted: a watch refused before its first message
// (invalid argument, not synced, over a limit) waits the tarpit's delay
// before its answer, as a refused ListPods does; a watch that sent messages,
// one dropped for falling behind and one whose revision is too old are
// answered at once, so that their clients recover at once. Before, every
// refused watch was answered at once (8,300 refusals a second).
func TestWatchRefusalsTarpitted(t *testing.T) {
	const delay = 100 * time.Millisecond
	refused := func(code connect.Code, reason string) error {
		return errinfo.New(code, reason, errors.New("refused"), nil)
	}
	for _, tc := range []struct {
		name string
		sent bool
		err  error
		want time.Duration
	}{
		{"invalid field mask", false, refused(connect.CodeInvalidArgument, errinfo.InvalidFieldMask), delay},
		{"not synced", false, refused(connect.CodeFailedPrecondition, errinfo.NotSynced), delay},
		{"too many watches", false, refused(connect.CodeResourceExhausted, errinfo.TooManyWatches), delay},
		{"too many masks", false, refused(connect.CodeResourceExhausted, errinfo.TooManyMasks), delay},
		{"fell behind", false, refused(connect.CodeResourceExhausted, errinfo.FellBehind), 0},
		{"revision too old", false, refused(connect.CodeOutOfRange, errinfo.RevisionTooOld), 0},
		{"ended after its events", true, refused(connect.CodeInvalidArgument, errinfo.InvalidFieldMask), 0},
		{"ended well", false, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var wrap connect.Interceptor
				for _, n := range guard.Chain(guard.Guards{Tarpit: guard.NewTarpit(delay, 8)}) {
					if n.Name == guard.NameWatchTarpit {
						wrap = n.Interceptor
					}
				}
				if wrap == nil {
					t.Fatalf("no %s interceptor in the chain of a tarpit", guard.NameWatchTarpit)
				}
				h := wrap.WrapStreamingHandler(func(_ context.Context, conn connect.StreamingHandlerConn) error {
					if tc.sent {
						_ = conn.Send(struct{}{})
					}
					return tc.err
				})
				start := time.Now()
				if err := h(context.Background(), fakeStream{}); !errors.Is(err, tc.err) {
					t.Fatalf("watch ended with %v, want %v", err, tc.err)
				}
				if got := time.Since(start); got != tc.want {
					t.Fatalf("answered after %v, want %v", got, tc.want)
				}
			})
		})
	}
}

// TestWatchesNotRateLimited: the rate limit of ListPods and GetPod leaves
// watches alone, as the seed's rule says, even with its bucket empty.
func TestWatchesNotRateLimited(t *testing.T) {
	chain := guard.Chain(guard.Guards{Limiter: never{}, PerClient: admit.NewKeyedLimiter(1e-9, 0), Tarpit: guard.NewTarpit(time.Hour, 8)})
	var h connect.StreamingHandlerFunc = func(context.Context, connect.StreamingHandlerConn) error { return nil }
	for i := len(chain) - 1; i >= 0; i-- {
		h = chain[i].WrapStreamingHandler(h)
	}
	if err := h(context.Background(), fakeStream{}); err != nil {
		t.Fatalf("watch with the rate limit spent: %v", err)
	}
}

// never is a rate limit whose bucket is always empty.
type never struct{}

func (never) Allow() bool { return false }
