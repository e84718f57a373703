package service

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/podsapi/podsapi/errinfo"
)

// TestSnapshotTurns: a client's watches take their snapshot turns one at a
// time, in the order they came, each until it ends or a slice passes
// without a write of its watch; another client
// takes its turn at once, not behind them. Before, every watch sent its
// snapshot at once: eight clients looping watches ran 143 snapshots a
// second, and every other client's watch waited behind them.
func TestSnapshotTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		turns := &snapshotTurns{perClient: 1, slice: time.Second}
		ctx := context.Background()
		endA1, err := turns.take(ctx, "attacker", nil)
		if err != nil {
			t.Fatal(err)
		}
		// The attacker's next watches wait in line, in order.
		var order []int
		done := make(chan int, 2)
		for i := range 2 {
			go func() {
				end, err := turns.take(ctx, "attacker", nil)
				if err != nil {
					t.Error(err)
					return
				}
				done <- i
				end.end()
			}()
			synctest.Wait() // the first one is in line before the second
		}
		// The victim's turn is its own.
		start := time.Now()
		endV, err := turns.take(ctx, "victim", nil)
		if err != nil || time.Since(start) != 0 {
			t.Fatalf("victim waited %v behind the attacker (%v)", time.Since(start), err)
		}
		endV.end()
		select {
		case i := <-done:
			t.Fatalf("attacker's watch %d took a turn while its first held it", i)
		default:
		}
		endA1.end()
		endA1.end() // giving a turn back twice gives it back once
		for range 2 {
			order = append(order, <-done)
		}
		if order[0] != 0 || order[1] != 1 {
			t.Fatalf("the attacker's watches took their turns in the order %v, want [0 1]", order)
		}
		synctest.Wait()
		if n := len(turns.clients); n != 0 {
			t.Fatalf("%d clients remembered with no watch in line", n)
		}

		// A turn held a slice without a write passes to the next watch.
		end, _ := turns.take(ctx, "slow", nil)
		defer end.end()
		start = time.Now()
		end2, err := turns.take(ctx, "slow", nil)
		if err != nil {
			t.Fatal(err)
		}
		end2.end()
		if got := time.Since(start); got != time.Second {
			t.Fatalf("the next watch waited %v behind a turn held for ever, want the slice (1s)", got)
		}

		// A turn whose watch writes in every slice is kept: the next
		// watch waits until it is ended, three slices later. Before,
		// every turn passed after one slice, and the watches of a herd
		// wrote their snapshots three and more at a time beside another
		// client's one.
		busy, _ := turns.take(ctx, "busy", nil)
		writer := make(chan struct{})
		go func() {
			defer close(writer)
			for range 6 {
				time.Sleep(time.Second / 2)
				busy.wrote()
			}
			busy.end()
		}()
		start = time.Now()
		next, err := turns.take(ctx, "busy", nil)
		if err != nil {
			t.Fatal(err)
		}
		next.end()
		<-writer
		if got := time.Since(start); got != 3*time.Second {
			t.Fatalf("the next watch waited %v behind a turn whose watch wrote every half slice for 3s, want 3s", got)
		}

		// A watch in line leaves when its client does, or at shutdown.
		hold, _ := turns.take(ctx, "c", nil)
		defer hold.end()
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := turns.take(cctx, "c", nil); err != context.Canceled {
			t.Fatalf("take of a watch whose client left: %v, want context.Canceled", err)
		}
		shutdown := make(chan struct{})
		close(shutdown)
		if _, err := turns.take(ctx, "c", shutdown); err != errShuttingDown {
			t.Fatalf("take at shutdown: %v, want errShuttingDown", err)
		}
	})
}

// TestWatchMasks: the distinct masks of one client's watches, and of all,
// are bounded; a mask in use is shared without counting again; a watch that
// ends frees its mask. Before, 900 watchers with distinct masks cost 0.86
// core at 100 changes/s.
func TestWatchMasks(t *testing.T) {
	m := &watchMasks{perClient: 2, total: 4}
	release := map[string]func(){}
	acquire := func(client, key, wantReason string) {
		t.Helper()
		r, err := m.acquire(client, key)
		if got := reasonOfErr(err); got != wantReason {
			t.Fatalf("acquire(%s, %s): %v, want reason %q", client, key, err, wantReason)
		}
		if err == nil {
			release[client+key] = r
		}
	}
	acquire("a", "m1", "")
	acquire("a", "m2", "")
	acquire("a", "m3", errinfo.TooManyMasks) // a's share
	acquire("b", "m1", "")                   // in use: counts once in all
	acquire("b", "m3", "")
	acquire("c", "m4", "")
	acquire("c", "m5", errinfo.TooManyMasks) // every client's
	acquire("c", "m2", "")                   // in use
	acquire("c", "m1", errinfo.TooManyMasks) // c's share
	release["a"+"m2"]()
	acquire("a", "m3", "") // a's second mask again
	release["c"+"m2"]()
	acquire("d", "m5", "") // m2 is used by no watch now
	acquire("e", "m6", errinfo.TooManyMasks)
	for _, r := range release {
		r()
	}
	if len(m.byClient) != 0 || len(m.all) != 0 || m.ofClients.Held() != 0 || m.distinct.Held() != 0 {
		t.Fatalf("masks counted after every watch ended: %v, %v", m.byClient, m.all)
	}
}

// reasonOfErr returns the ErrorInfo reason of an error the service built.
func reasonOfErr(err error) string {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return ""
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if info, ok := v.(*errdetails.ErrorInfo); ok {
				return info.GetReason()
			}
		}
	}
	return ""
}

// TestSnapshotTurnsKeepSnapshots checks the snapshots kept between the turns
// of a handler: a watch that waits in line behind another of the same key
// shares the snapshot the one before it sent, and once every turn is given
// back nothing is kept. Before, each of a client's watches built its
// snapshot again: the one before had dropped it as it gave its turn back.
func TestSnapshotTurnsKeepSnapshots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHandler(nil, []Option{WithSnapshotsPerClient(1, time.Hour)})
		ctx := context.Background()
		builds := 0
		build := func(reserve func(int) bool) (*envelopedSnapshot, error) {
			builds++
			reserve(100)
			return &envelopedSnapshot{first: []byte{1}}, nil
		}
		// watch takes its client's turn, gets the snapshot of key, waits
		// for sent, then releases the snapshot and gives the turn back, in
		// the order watch does.
		watch := func(key string, sent <-chan struct{}) (built bool) {
			turn, err := h.turns.take(ctx, "c", nil)
			if err != nil {
				t.Error(err)
				return false
			}
			defer turn.end()
			_, built, release, _ := h.snapshots.get(1, key, build)
			defer release()
			<-sent
			return built
		}
		kept := func() int {
			h.snapshots.mu.Lock()
			defer h.snapshots.mu.Unlock()
			return h.snapshots.count
		}

		first, second := make(chan struct{}), make(chan struct{})
		builtFirst, builtSecond := make(chan bool, 1), make(chan bool, 1)
		go func() { builtFirst <- watch("k", first) }()
		synctest.Wait() // the first watch sends its snapshot
		go func() { builtSecond <- watch("k", second) }()
		synctest.Wait() // the second waits in line
		close(first)
		if !<-builtFirst {
			t.Fatal("the first watch did not build its snapshot")
		}
		synctest.Wait() // the second takes its turn and its snapshot
		if kept() != 1 {
			t.Fatalf("%d snapshots in flight, want the one shared", kept())
		}
		close(second)
		if <-builtSecond {
			t.Fatal("the watch in line built again the snapshot the one before it sent")
		}
		synctest.Wait()
		if n := kept(); n != 0 || h.turns.busy() {
			t.Fatalf("%d snapshots kept (turns busy %v) after every turn was given back, want 0", n, h.turns.busy())
		}

		// Alone, a watch keeps nothing for the next.
		done := make(chan struct{})
		close(done)
		watch("k", done)
		if n := kept(); n != 0 {
			t.Fatalf("%d snapshots kept after a lone watch, want 0", n)
		}
		if builds != 2 {
			t.Fatalf("%d builds, want 2", builds)
		}
	})
}
