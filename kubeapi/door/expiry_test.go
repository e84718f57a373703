package door

import (
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/podsapi/podsapi/internal/admit"
)

// movedClock is a clock the test moves.
type movedClock struct{ now time.Time }

func (c *movedClock) Now() time.Time { return c.now }

// TestAccessDecisionsExpire: a decision is asked again once its TTL
// (allowed, or not) has passed, never before.
func TestAccessDecisionsExpire(t *testing.T) {
	attrs := authorizer.AttributesRecord{User: &user.DefaultInfo{Name: "agent"}, Verb: "list", APIVersion: "v1", Resource: "pods", ResourceRequest: true}
	const allowTTL, denyTTL = 5 * time.Minute, 30 * time.Second
	for _, tc := range []struct {
		name   string
		answer func(http.ResponseWriter, []byte)
		ttl    time.Duration
	}{
		{"Allowed", decide(true, false), allowTTL},
		{"Denied", decide(false, true), denyTTL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &reviewer{answers: []func(http.ResponseWriter, []byte){tc.answer, tc.answer}}
			a := newAccessReviews(newReviewer(t, v).authorization, fastBackoff, time.Minute, allowTTL, denyTTL, nil)
			clock := &movedClock{now: time.Unix(1e9, 0)}
			a.answers = cache.NewLRUExpireCacheWithClock(accessCacheSize, clock)
			for _, step := range []struct {
				after time.Duration
				want  int
			}{{0, 1}, {tc.ttl - time.Second, 1}, {2 * time.Second, 2}} {
				clock.now = clock.now.Add(step.after)
				if _, _, err := a.Authorize(t.Context(), attrs); err != nil {
					t.Fatal(err)
				}
				if got := v.count(); got != step.want {
					t.Fatalf("%v later: %d reviews, want %d", step.after, got, step.want)
				}
			}
		})
	}
}

// TestAccessReviewsBudgetPerUser: a user whose reviews are spent gets
// errReviewThrottled without a review sent; another user does not.
func TestAccessReviewsBudgetPerUser(t *testing.T) {
	v := &reviewer{answers: []func(http.ResponseWriter, []byte){decide(false, false), decide(false, false), decide(true, false)}}
	a := newAccessReviews(newReviewer(t, v).authorization, fastBackoff, time.Minute, time.Hour, time.Hour, userBudgetOf(admit.NewKeyedLimiter(1e-9, 2)))
	ask := func(name, ns string) error {
		attrs := authorizer.AttributesRecord{User: &user.DefaultInfo{Name: name}, Verb: "list", APIVersion: "v1", Resource: "pods", Namespace: ns, ResourceRequest: true}
		_, _, err := a.Authorize(t.Context(), attrs)
		return err
	}
	for i, ns := range []string{"a", "b", "c", "d"} {
		err := ask("flooder", ns)
		if throttled := errors.Is(err, errReviewThrottled); throttled != (i >= 2) {
			t.Fatalf("flooder's review %d: %v", i, err)
		}
	}
	if err := ask("other", "a"); err != nil {
		t.Fatalf("another user beside the flooder: %v", err)
	}
	if got := v.count(); got != 3 {
		t.Fatalf("%d reviews sent, want 3", got)
	}
}

// TestKnownTokensExpire: a token seen authenticated needs no budget for
// the token cache's TTL, and its budget again after.
func TestKnownTokensExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newReviewBudget(time.Minute, nil, ReviewBudgets{})
		b.perAddress = admit.NewKeyedLimiter(1e-9, 1)
		if v, _ := b.admit(t.Context(), "10.0.0.1", "static"); v != tokenReviewed {
			t.Fatalf("first sight: %v, want reviewed", v)
		}
		b.authenticated("static", "alice")
		for range 10 {
			if v, who := b.admit(t.Context(), "10.0.0.1", "static"); v != tokenKnown || who != "alice" {
				t.Fatalf("within the TTL: %v %q, want known as alice", v, who)
			}
		}
		time.Sleep(time.Minute)
		if v, _ := b.admit(t.Context(), "10.0.0.1", "static"); v != tokenThrottled {
			t.Fatalf("after the TTL, its address's budget spent: %v, want throttled", v)
		}
	})
}

// userBudgetOf returns a review budget of perUser alone.
func userBudgetOf(perUser *admit.KeyedLimiter) *reviewBudget {
	b := newReviewBudget(time.Minute, nil, ReviewBudgets{})
	b.perUser = perUser
	return b
}
