package door

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// TestReviewBudgetsShareFairly: accounts asking reviews in a loop share the
// total fairly: what the budget lets through in all stays within the total
// (so that nothing waits in the review client's own limiter behind them,
// where every caller's reviews wait alike), and another account calling at
// its own pace gets its reviews. With a fixed budget per account and no
// total, eight accounts would send twice the review client's limit.
func TestReviewBudgetsShareFairly(t *testing.T) {
	for _, tc := range []struct {
		name     string
		flooders int
	}{
		{"FewAccounts", 3},
		{"ManyAccounts", 8},
		{"MoreAccountsThanTheTotal", 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				budgets := DefaultReviewBudgets()
				b := newReviewBudget(time.Minute, nil, budgets)
				const seconds = 10
				sent, asked, answered := 0, 0, 0
				// Each flooder asks every 10 ms, the agent every 500 ms,
				// after them: the agent finds what they left.
				for tick := range seconds * 100 {
					for i := range tc.flooders {
						if b.allowUser(fmt.Sprintf("system:serviceaccount:a:flood-%d", i)) {
							sent++
						}
					}
					if tick%50 == 0 {
						asked++
						if b.allowUser("system:serviceaccount:b:agent") {
							answered++
							sent++
						}
					}
					time.Sleep(10 * time.Millisecond)
				}
				if limit := int(budgets.Total)*seconds + burstOf(budgets.Total); sent > limit {
					t.Errorf("%d reviews let through in %d s, beyond the total's %d", sent, seconds, limit)
				}
				// The agent asks 2 a second: within its share (the total
				// over the accounts calling) it has them all; beyond, at
				// least half its share, as every flooder has at most its
				// share.
				want := asked
				if share := budgets.Total / float64(tc.flooders+1); share < 2 {
					want = int(share * seconds / 2)
				}
				if answered < want {
					t.Errorf("the agent had %d of its %d reviews, want at least %d", answered, asked, want)
				}
				t.Logf("%d flooders: %d reviews in all, the agent %d of %d", tc.flooders, sent, answered, asked)
			})
		})
	}
}
