package service

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/podsapi/podsapi/internal/admit"
)

// Defaults of the shares of snapshot and projection work each client gets.
const (
	// DefaultSnapshotsPerClient is how many watches of one client send
	// their snapshot (or replay) at once; the client's other new watches
	// wait in line behind them, in the order they came, before they take
	// theirs from the store.
	DefaultSnapshotsPerClient = 1
	// DefaultSnapshotTurn is how long a watch keeps its client's turn
	// without writing: a watch whose writes block that long (a client
	// that does not read) lets the next one start beside it.
	DefaultSnapshotTurn = 20 * time.Millisecond
	// DefaultMasksPerClient bounds the distinct field masks of one
	// client's open watches: each costs a projection of every change.
	DefaultMasksPerClient = 32
	// DefaultMaxWatchMasks bounds the distinct field masks of the open
	// watches of all clients.
	DefaultMaxWatchMasks = 256
)

// clientOf returns the name of the client of ctx.
func (h *handler) clientOf(ctx context.Context) string {
	if h.client == nil {
		return ""
	}
	return h.client(ctx)
}

// snapshotTurns hands out the turns of each client's watches to send their
// snapshot, so that snapshot work is shared between clients: a client that
// opens watches in a loop waits behind its own, not behind others'. A watch
// takes its turn before it takes its snapshot from the store, so that a
// watch waiting in line holds nothing but its goroutine (its client's open
// watches are bounded), and no queue of live events that could overflow.
type snapshotTurns struct {
	perClient int
	slice     time.Duration
	// idle, if set, is called once every turn is given back and no watch
	// waits for one, outside mu: the snapshots kept for the next watches in
	// line are no longer needed (snapshotCache.dropIdle).
	idle func()

	mu      sync.Mutex
	clients map[string]*clientTurns
}

// busy reports whether a watch holds or waits for a turn.
func (t *snapshotTurns) busy() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.clients) > 0
}

// clientTurns are the turns of one client: a slot of sem per watch sending
// its snapshot; refs counts the watches holding or waiting for one.
type clientTurns struct {
	sem  chan struct{}
	refs int
}

// take waits for a turn of client, until ctx ends (ctx.Err()) or done is
// closed (errShuttingDown), and returns it. The turn is given back by
// itself once a slice passes in which its watch wrote nothing: a watch
// whose client reads keeps its turn until it ends it, and one whose client
// does not lets the next start beside it.
func (t *snapshotTurns) take(ctx context.Context, client string, done <-chan struct{}) (*snapshotTurn, error) {
	t.mu.Lock()
	if t.clients == nil {
		t.clients = make(map[string]*clientTurns)
	}
	c := t.clients[client]
	if c == nil {
		c = &clientTurns{sem: make(chan struct{}, max(t.perClient, 1))}
		t.clients[client] = c
	}
	c.refs++
	t.mu.Unlock()
	// Senders blocked on a channel are woken in the order they came: the
	// line is first come, first served.
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		t.unref(client, c)
		return nil, ctx.Err()
	case <-done:
		t.unref(client, c)
		return nil, errShuttingDown
	}
	tn := &snapshotTurn{give: func() {
		<-c.sem
		t.unref(client, c)
	}}
	tn.mu.Lock()
	defer tn.mu.Unlock()
	tn.timer = time.AfterFunc(t.slice, func() {
		tn.mu.Lock()
		defer tn.mu.Unlock()
		if n := tn.writes.Load(); n != tn.seen {
			tn.seen = n
			tn.timer.Reset(t.slice)
			return
		}
		tn.once.Do(tn.give)
	})
	return tn, nil
}

// snapshotTurn is the turn of one watch.
type snapshotTurn struct {
	give func()
	once sync.Once
	// writes counts the watch's writes; seen is their count at the last
	// slice's end. mu guards timer and seen.
	writes atomic.Uint64
	mu     sync.Mutex
	timer  *time.Timer
	seen   uint64
}

// wrote tells the turn that its watch wrote: the turn is kept for another
// slice.
func (tn *snapshotTurn) wrote() { tn.writes.Add(1) }

// end gives the turn back; it may be called more than once.
func (tn *snapshotTurn) end() {
	tn.mu.Lock()
	tn.timer.Stop()
	tn.mu.Unlock()
	tn.once.Do(tn.give)
}

// turnStream is the Stream of a watch holding its turn: each write it makes
// raw keeps the turn.
type turnStream struct {
	Stream
	turn *snapshotTurn
}

func (s turnStream) WriteRaw(b []byte) error {
	err := s.Stream.WriteRaw(b)
	s.turn.wrote()
	return err
}

// unref forgets c, the turns of client, once no watch holds or waits for
// one.
func (t *snapshotTurns) unref(client string, c *clientTurns) {
	t.mu.Lock()
	if c.refs--; c.refs == 0 {
		delete(t.clients, client)
	}
	idle := len(t.clients) == 0
	t.mu.Unlock()
	if idle && t.idle != nil {
		t.idle()
	}
}

// watchMasks counts the distinct field masks of the open watches, per
// client and in all, under bounds: every change is projected once per mask
// in use (twice for MODIFIED, to tell whether the view changed), so the
// masks bound the projection work of a change, and each client's share of
// it. The bounds are admit.Slots: one slot per mask a client uses (its
// share the smaller of perClient and half the total), one per mask in use
// by any client.
type watchMasks struct {
	perClient, total int

	mu sync.Mutex
	// byClient counts the watches of each client by mask, and the release
	// of the client's slot of each mask; all counts the clients using each
	// mask, and the release of its slot of the total.
	byClient map[string]map[string]*maskUse
	all      map[string]*maskUse
	// ofClients holds a slot per (client, mask), distinct one per mask.
	ofClients, distinct *admit.Slots
}

// maskUse is how many use a mask, and how to give back its slot.
type maskUse struct {
	n       int
	release func()
}

// acquire counts a watch of client with the mask of key, or returns the
// error that refuses it; the function it returns uncounts the watch (once,
// however often it is called).
func (m *watchMasks) acquire(client, key string) (func(), error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byClient == nil {
		m.byClient, m.all = make(map[string]map[string]*maskUse), make(map[string]*maskUse)
		m.ofClients = admit.NewSlots(0, admit.Share(m.total, m.perClient))
		m.distinct = admit.NewSlots(m.total, 0)
	}
	masks := m.byClient[client]
	use := masks[key]
	if use == nil {
		mine, err := m.ofClients.Acquire(client)
		if err != nil {
			return nil, errTooManyMasks(client, m.ofClients.Share())
		}
		all := m.all[key]
		if all == nil {
			release, err := m.distinct.Acquire("")
			if err != nil {
				mine()
				return nil, errTooManyMasks("", m.total)
			}
			all = &maskUse{release: release}
			m.all[key] = all
		}
		all.n++
		if masks == nil {
			masks = make(map[string]*maskUse)
			m.byClient[client] = masks
		}
		use = &maskUse{release: mine}
		masks[key] = use
	}
	use.n++
	var once sync.Once
	return func() { once.Do(func() { m.release(client, key) }) }, nil
}

// release uncounts a watch of client with the mask of key.
func (m *watchMasks) release(client, key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	masks := m.byClient[client]
	use := masks[key]
	if use.n--; use.n > 0 {
		return
	}
	use.release()
	delete(masks, key)
	if len(masks) == 0 {
		delete(m.byClient, client)
	}
	all := m.all[key]
	if all.n--; all.n == 0 {
		all.release()
		delete(m.all, key)
	}
}
