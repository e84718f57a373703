package guard

import (
	"context"
	"testing"

	"connectrpc.com/connect"
	"golang.org/x/time/rate"

	"github.com/podsapi/podsapi/internal/admit"
)

// unaryChain applies the interceptors of g to a handler that succeeds.
func unaryChain(g Guards) connect.UnaryFunc {
	next := connect.UnaryFunc(func(context.Context, connect.AnyRequest) (connect.AnyResponse, error) {
		return nil, nil
	})
	is := Chain(g)
	for i := len(is) - 1; i >= 0; i-- {
		next = is[i].WrapUnary(next)
	}
	return next
}

// TestPerClientFairness floods from one UID: once its own bucket is empty,
// its calls are refused without spending the shared bucket, so another UID
// is still served.
func TestPerClientFairness(t *testing.T) {
	shared := rate.NewLimiter(1e-9, 10)
	call := unaryChain(Guards{PerClient: admit.NewKeyedLimiter(1e-9, 3), Limiter: shared})
	flooder := WithPeer(context.Background(), &Peer{Known: true, UID: 1000})
	other := WithPeer(context.Background(), &Peer{Known: true, UID: 1001})
	req := connect.NewRequest(&struct{}{})
	ok := 0
	for range 1000 {
		if _, err := call(flooder, req); err == nil {
			ok++
		} else if connect.CodeOf(err) != connect.CodeResourceExhausted {
			t.Fatalf("flooder refused with %v, want ResourceExhausted", err)
		}
	}
	if ok != 3 {
		t.Fatalf("flooder got %d calls through, want its burst of 3", ok)
	}
	for i := range 3 {
		if _, err := call(other, req); err != nil {
			t.Fatalf("call %d of another client: %v", i, err)
		}
	}
	if got := int(shared.Tokens() + 0.5); got != 4 {
		t.Fatalf("shared bucket holds %d tokens, want 10-3-3 = 4", got)
	}
}

// TestAccessPolicy checks UIDs, effective and supplementary groups, and
// unknown peers.
func TestAccessPolicy(t *testing.T) {
	a := &AccessPolicy{UIDs: []uint32{0}, GIDs: []uint32{500}}
	for _, c := range []struct {
		p    *Peer
		want bool
	}{
		{nil, false},
		{&Peer{}, false},
		{&Peer{Known: true, UID: 0, GID: 7}, true},
		{&Peer{Known: true, UID: 9, GID: 500}, true},
		{&Peer{Known: true, UID: 9, GID: 9, Groups: []uint32{4, 500}}, true},
		{&Peer{Known: true, UID: 9, GID: 9, Groups: []uint32{4}}, false},
	} {
		if got := a.Allows(c.p); got != c.want {
			t.Errorf("Allows(%+v) = %v, want %v", c.p, got, c.want)
		}
	}
	if !(&AccessPolicy{AnyPeer: true}).Allows(nil) {
		t.Error("AnyPeer denies")
	}
}
