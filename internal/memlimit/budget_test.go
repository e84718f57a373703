package memlimit_test

import (
	"errors"
	"testing"

	"github.com/podsapi/podsapi/internal/memlimit"
)

func TestBudget(t *testing.T) {
	b := memlimit.NewBudget(1000)
	var history int64 = 100
	b.Track(memlimit.History, func() int64 { return history })
	steps := []struct {
		name   string
		client string
		kind   memlimit.Kind
		n      int64
		want   error
	}{
		{"shared bytes fit", "", memlimit.Views, 400, nil},
		{"a client's bytes within its share", "a", memlimit.Lists, 250, nil},
		{"beyond the client's share of 250", "a", memlimit.Replays, 1, memlimit.ErrOverShare},
		{"another client keeps its share", "b", memlimit.Replays, 250, nil},
		{"beyond the budget, tracked bytes counted", "c", memlimit.Snapshots, 1, memlimit.ErrOverBudget},
	}
	for _, s := range steps {
		if err := b.ReserveFor(s.client, s.kind, s.n); !errors.Is(err, s.want) {
			t.Fatalf("%s: %v, want %v", s.name, err, s.want)
		}
	}
	if got := b.InUse(); got != 1000 {
		t.Fatalf("in use %d, want 1000", got)
	}
	if b.Refused(memlimit.Replays) != 1 || b.Refused(memlimit.Snapshots) != 1 {
		t.Fatalf("refusals counted %d replays, %d snapshots; want 1 and 1", b.Refused(memlimit.Replays), b.Refused(memlimit.Snapshots))
	}
	b.ReleaseFor("a", memlimit.Lists, 250)
	if err := b.ReserveFor("a", memlimit.Replays, 250); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	history = 400
	if b.Reserve(memlimit.Views, 1) {
		t.Fatal("a reservation fit although the history grew over the budget")
	}
	var none *memlimit.Budget
	if !none.Reserve(memlimit.Views, 1<<40) || none.Used(memlimit.Views) != 0 {
		t.Fatal("a nil budget refused or counted")
	}
}

func TestBudgetBytes(t *testing.T) {
	if got := memlimit.BudgetBytes(0); got != memlimit.DefaultBudgetBytes {
		t.Fatalf("no limit: %d", got)
	}
	if got := memlimit.BudgetBytes(256 << 20); got != 128<<20 {
		t.Fatalf("256 MiB: %d, want half", got)
	}
}
