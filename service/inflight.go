package service

import (
	"context"
	"net/http"
	"sync"
)

// responsesShare is the divisor of the bytes of responses in flight one
// client may hold, of those all may: as the memory budget's clients.
const responsesShare = 4

// responsesInFlight bounds the bytes of the unary responses (ListPods,
// GetPod, FindPods) being written: a client that asks and never reads holds
// each answer in memory until the write-stall timeout ends its connection,
// and without a bound a few connections of such calls take the server
// beyond its memory limit. A response is counted from when it is built
// until its call ends (TrackResponses). A client with nothing in flight is
// always answered, so that any response can be sent; a client with
// responses in flight is refused one that would take it beyond its share
// (a quarter of the bound) or all clients beyond the bound. A nil
// *responsesInFlight counts nothing.
type responsesInFlight struct {
	total, perClient int64
	metrics          *Metrics

	mu      sync.Mutex
	used    int64
	clients map[string]int64
}

// newResponsesInFlight returns the bound of total bytes, or nil for none
// (total <= 0).
func newResponsesInFlight(total int64, m *Metrics) *responsesInFlight {
	if total <= 0 {
		return nil
	}
	return &responsesInFlight{total: total, perClient: total / responsesShare, metrics: m, clients: make(map[string]int64)}
}

// responseSlot is what one call holds in flight.
type responseSlot struct {
	client string
	bytes  int64
}

// responseSlotKey is the context key of a call's *responseSlot.
type responseSlotKey struct{}

// track returns next with each call's responses counted until it ends.
func (f *responsesInFlight) track(next http.Handler) http.Handler {
	if f == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slot := &responseSlot{}
		defer f.release(slot)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), responseSlotKey{}, slot)))
	})
}

// reserve counts n bytes of the response of the call of ctx, of client,
// until the call ends, or fails with errResponsesInFlight when they do not
// fit. A call served without track counts nothing.
func (f *responsesInFlight) reserve(ctx context.Context, client string, n int64) error {
	slot, _ := ctx.Value(responseSlotKey{}).(*responseSlot)
	if f == nil || slot == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	held := f.clients[client]
	if held > 0 && (held+n > f.perClient || f.used+n > f.total) {
		f.metrics.responseRefused()
		return errResponsesInFlight(client, held, n, f.perClient)
	}
	f.used += n
	f.clients[client] += n
	slot.client = client
	slot.bytes += n
	f.metrics.responsesHeld(n)
	return nil
}

// release returns what slot holds.
func (f *responsesInFlight) release(slot *responseSlot) {
	if slot.bytes == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.used -= slot.bytes
	if f.clients[slot.client] -= slot.bytes; f.clients[slot.client] <= 0 {
		delete(f.clients, slot.client)
	}
	f.metrics.responsesHeld(-slot.bytes)
}

// TrackResponses returns next, the server's handler of both services,
// counting the bytes of each call's response until the call ends, so that
// the responses in flight stay within their bound (half the memory budget,
// WithBudget): a client asking faster than it reads is refused
// RESOURCE_EXHAUSTED MEMORY_BUDGET_EXCEEDED. Without it (or without a
// budget) responses are not bounded.
func (h Handlers) TrackResponses(next http.Handler) http.Handler {
	if h.h == nil {
		return next
	}
	return h.h.responses.track(next)
}
