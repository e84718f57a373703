package budget_test

import (
	"errors"
	"testing"

	"github.com/podsapi/podsapi/budget"
)

func TestBudget(t *testing.T) {
	b := budget.New(1000)
	var history int64 = 100
	b.Track(budget.History, func() int64 { return history })
	steps := []struct {
		name   string
		client string
		kind   budget.Kind
		n      int64
		want   error
	}{
		{"shared bytes fit", "", budget.Views, 400, nil},
		{"a client's bytes within its share", "a", budget.Lists, 250, nil},
		{"beyond the client's share of 250", "a", budget.Replays, 1, budget.ErrOverShare},
		{"another client keeps its share", "b", budget.Replays, 250, nil},
		{"beyond the budget, tracked bytes counted", "c", budget.Snapshots, 1, budget.ErrOverBudget},
	}
	for _, s := range steps {
		if err := b.ReserveFor(s.client, s.kind, s.n); !errors.Is(err, s.want) {
			t.Fatalf("%s: %v, want %v", s.name, err, s.want)
		}
	}
	if got := b.InUse(); got != 1000 {
		t.Fatalf("in use %d, want 1000", got)
	}
	if b.Refused(budget.Replays) != 1 || b.Refused(budget.Snapshots) != 1 {
		t.Fatalf("refusals counted %d replays, %d snapshots; want 1 and 1", b.Refused(budget.Replays), b.Refused(budget.Snapshots))
	}
	b.ReleaseFor("a", budget.Lists, 250)
	if err := b.ReserveFor("a", budget.Replays, 250); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	history = 400
	if b.Reserve(budget.Views, 1) {
		t.Fatal("a reservation fit although the history grew over the budget")
	}
	var none *budget.Budget
	if !none.Reserve(budget.Views, 1<<40) || none.Used(budget.Views) != 0 {
		t.Fatal("a nil budget refused or counted")
	}
}

func TestBudgetBytes(t *testing.T) {
	if got := budget.Bytes(0); got != budget.DefaultBytes {
		t.Fatalf("no limit: %d", got)
	}
	if got := budget.Bytes(256 << 20); got != 128<<20 {
		t.Fatalf("256 MiB: %d, want half", got)
	}
}
