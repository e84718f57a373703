package service

import (
	"context"
	"testing"

	"connectrpc.com/connect"
)

// TestResponsesInFlight: the bound of the responses in flight, 100 bytes of
// which a client may hold 25, on calls in flight (held) before the one
// reserving.
func TestResponsesInFlight(t *testing.T) {
	type call struct {
		client string
		n      int64
	}
	tests := []struct {
		name string
		held []call
		next call
		ok   bool
	}{
		{"NothingHeld", nil, call{"a", 10}, true},
		{"LargerThanTheShareWithNothingHeld", nil, call{"a", 90}, true},
		{"LargerThanTheBoundWithNothingHeld", nil, call{"a", 500}, true},
		{"WithinTheShare", []call{{"a", 10}}, call{"a", 15}, true},
		{"BeyondTheShare", []call{{"a", 10}}, call{"a", 16}, false},
		{"OthersShareIsNotMine", []call{{"a", 25}, {"b", 25}}, call{"b", 1}, false},
		{"AnotherClientWithNothingHeld", []call{{"a", 25}}, call{"b", 25}, true},
		{"BeyondTheBound", []call{{"a", 25}, {"b", 25}, {"c", 25}, {"d", 24}, {"e", 1}}, call{"e", 1}, false},
		{"NothingHeldBeyondTheBound", []call{{"a", 25}, {"b", 25}, {"c", 25}, {"d", 25}}, call{"e", 10}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newResponsesInFlight(100, nil)
			var slots []*responseSlot
			reserve := func(c call) error {
				slot := &responseSlot{}
				slots = append(slots, slot)
				return f.reserve(context.WithValue(context.Background(), responseSlotKey{}, slot), c.client, c.n)
			}
			for _, c := range tt.held {
				if err := reserve(c); err != nil {
					t.Fatalf("held %v: %v", c, err)
				}
			}
			err := reserve(tt.next)
			if ok := err == nil; ok != tt.ok {
				t.Fatalf("reserve %v = %v, want ok %v", tt.next, err, tt.ok)
			}
			if err != nil && connect.CodeOf(err) != connect.CodeResourceExhausted {
				t.Errorf("refusal %v, want RESOURCE_EXHAUSTED (its reason is checked on the wire: server's TestUnreadResponsesBounded)", err)
			}
			for _, s := range slots {
				f.release(s)
			}
			if f.used != 0 || len(f.clients) != 0 {
				t.Errorf("after every release: %d bytes held by %v", f.used, f.clients)
			}
		})
	}
}

// TestResponsesInFlightUntracked: a call served without TrackResponses,
// or without a budget, counts nothing and is never refused.
func TestResponsesInFlightUntracked(t *testing.T) {
	f := newResponsesInFlight(100, nil)
	for range 3 {
		if err := f.reserve(context.Background(), "a", 90); err != nil {
			t.Fatal(err)
		}
	}
	if f.used != 0 {
		t.Errorf("%d bytes counted for untracked calls", f.used)
	}
	var none *responsesInFlight
	if err := none.reserve(context.WithValue(context.Background(), responseSlotKey{}, &responseSlot{}), "a", 1<<40); err != nil {
		t.Errorf("without a bound: %v", err)
	}
}
