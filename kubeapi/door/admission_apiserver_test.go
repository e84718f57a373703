package door_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/podsapi/podsapi/kubeapi/door"
	"github.com/podsapi/podsapi/test/kubetest"
)

// The attacks on the door's budgets and shares that need credentials, or
// none (issue 47), each on loopback with bounded loops against a real API
// server: under each, valid callers (with tokens seen before and new ones)
// are answered within validWithin.

// flood runs workers goroutines sending requests of req (given the
// request's number) with c until stop is closed, at most qps a second in
// all when qps is positive, and returns the answers' codes by count once
// they have all stopped (0: no answer).
func flood(ctx context.Context, c *http.Client, workers int, qps float64, req func(i int64) *http.Request, stop <-chan struct{}) func() map[int]int {
	var (
		mu    sync.Mutex
		codes = map[int]int{}
		next  atomic.Int64
		wg    sync.WaitGroup
		limit = rate.NewLimiter(rate.Inf, 1)
	)
	if qps > 0 {
		limit = rate.NewLimiter(rate.Limit(qps), 1)
	}
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if limit.Wait(ctx) != nil {
					return
				}
				code := 0
				if resp, err := c.Do(req(next.Add(1)).WithContext(ctx)); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
				}
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		})
	}
	return func() map[int]int {
		wg.Wait()
		return codes
	}
}

func TestDoorAdmissionAPIServer(t *testing.T) {
	cp := kubetest.Start(t, nsReader, nsLister, nobody) // grantRoles waits for them.
	grantRoles(t, cp)
	ctx := t.Context()
	const pods = "/api/v1/namespaces/" + nsAllowed + "/pods"

	t.Run("varying selectors", func(t *testing.T) {
		// A token with no rights lists with a new label selector each
		// time, 200 at a time: each would be a new SubjectAccessReview.
		// New valid tokens are answered as if there were no flood.
		fresh := freshTokens(t, cp, "selectors", 5)
		local := newLocalDouble()
		s := attackDoor(t, cp, local, door.Config{})
		valid := s.client()
		seenBefore := cp.Token(nsReader) // A token seen before the flood.
		if a := get(t, valid, "https://"+s.addr+pods, seenBefore); a.code != 200 {
			t.Fatalf("valid caller before the flood: %d %s", a.code, a.body)
		}
		before := measure()
		stop := make(chan struct{})
		var seen atomic.Int64
		attacker := s.client()
		codes := flood(ctx, counting(attacker, &seen), 200, 0, func(i int64) *http.Request {
			req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("https://%s%s?labelSelector=app%%3Dx%d", s.addr, pods, i), nil)
			req.Header.Set("Authorization", "Bearer "+cp.Token(nobody))
			return req
		}, stop)
		waitUntil(t, "the flood to be answered", func() bool { return seen.Load() >= 400 })
		during := measure()
		var worst time.Duration
		for _, token := range append(fresh, seenBefore) {
			worst = max(worst, timed(t, "a valid token", direct(t, cp, pods+"?labelSelector=app%3Dy", token), func() {
				if a := get(t, valid, "https://"+s.addr+pods+"?labelSelector=app%3Dy", token); a.code != 200 {
					t.Errorf("valid token under a flood of selectors: %d %s", a.code, a.body)
				}
			}))
		}
		close(stop)
		got := codes()
		for code := range got {
			if code != http.StatusForbidden && code != http.StatusTooManyRequests {
				t.Errorf("the flood was answered %v, want only 403 and 429", got)
			}
		}
		attacker.CloseIdleConnections()
		valid.CloseIdleConnections()
		after := settle(t, before, 40)
		t.Logf("varying selectors, 200 at a time: answers %v; 5 new valid tokens and 1 seen before answered within %v; heap %.1f → %.1f → %.1f MiB",
			got, worst, before.heapMiB, during.heapMiB, after.heapMiB)
	})

	t.Run("garbage tokens from a shared address", func(t *testing.T) {
		// Garbage tokens at 400 a second from the address of the valid
		// callers (host-network agents share the node's): the budget of
		// that address's unknown tokens is spent, and new service-account
		// tokens from it, verified by their signature, are answered.
		fresh := freshTokens(t, cp, "shared", 5)
		local := newLocalDouble()
		s := attackDoor(t, cp, local, door.Config{})
		const source = "127.0.0.2"
		valid := s.http1From(source, 1)
		seenBefore := cp.Token(nsReader) // A token seen before the flood.
		if a := get(t, valid, "https://"+s.addr+pods, seenBefore); a.code != 200 {
			t.Fatalf("valid caller before the flood: %d %s", a.code, a.body)
		}
		stop := make(chan struct{})
		var throttled atomic.Int64
		// 512 connections, so that the refusals' second of delay does not
		// slow the flood below its rate. They are all open (each has had
		// two answers, after its handshake) before the valid callers ask:
		// what is judged is the flood, not the CPU of 512 handshakes.
		const workers = 512
		attacker := s.http1From(source, workers)
		codes := flood(ctx, throttledCounting(attacker, &throttled), workers, 400, func(i int64) *http.Request {
			req, _ := http.NewRequest(http.MethodGet, "https://"+s.addr+pods, nil)
			req.Header.Set("Authorization", fmt.Sprintf("Bearer garbage-%d", i))
			return req
		}, stop)
		waitUntil(t, "the flood's connections to be open and the address's budget spent", func() bool { return throttled.Load() >= 2*workers })
		answered, worst := 0, time.Duration(0)
		var took []time.Duration
		for _, token := range append(fresh, seenBefore) {
			d := timed(t, "a valid token from the flooded address", direct(t, cp, pods, token), func() {
				if a := get(t, valid, "https://"+s.addr+pods, token); a.code == 200 {
					answered++
				} else {
					t.Errorf("valid token from the flooded address: %d %s", a.code, a.body)
				}
			})
			took = append(took, d)
			worst = max(worst, d)
		}
		close(stop)
		got := codes()
		for code := range got {
			if code != 0 && code != http.StatusUnauthorized && code != http.StatusTooManyRequests {
				t.Errorf("garbage tokens answered %v, want only 401 and 429 (0: no answer)", got)
			}
		}
		attacker.CloseIdleConnections()
		valid.CloseIdleConnections()
		t.Logf("garbage tokens at 400/s from %s: answers %v; valid tokens from it (5 new, 1 seen before) answered %d of 6, within %v (each: %v)", source, got, answered, worst, took)
	})

	t.Run("passed-through watches", func(t *testing.T) {
		// One account opens 1,024 watches of namespaces, passed through,
		// each on its own HTTP/1.1 connection: its share is served, the
		// rest refused 429, and another caller is answered.
		const watches = 1024
		fresh := freshTokens(t, cp, "passed", 5)
		local := newLocalDouble()
		s := attackDoor(t, cp, local, door.Config{})
		before := measure()
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		admin := s.http1From("127.0.0.2", watches)
		var (
			mu    sync.Mutex
			codes = map[int]int{}
			open  []io.Closer
			wg    sync.WaitGroup
			sem   = make(chan struct{}, 64)
		)
		for range watches {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				req, _ := http.NewRequestWithContext(wctx, http.MethodGet, "https://"+s.addr+"/api/v1/namespaces?watch=true", nil)
				req.Header.Set("Authorization", "Bearer "+cp.Token(kubetest.AdminUser))
				code := 0
				resp, err := admin.Do(req)
				if err == nil {
					code = resp.StatusCode
				}
				mu.Lock()
				defer mu.Unlock()
				codes[code]++
				switch {
				case err != nil:
				case code == 200:
					open = append(open, resp.Body)
				default:
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
		during := measure()
		share := door.DefaultMaxWatchesPerCaller
		if codes[200] != share || codes[http.StatusTooManyRequests] != watches-share {
			t.Errorf("one account's %d passed-through watches: %v, want %d served (its share) and the rest 429", watches, codes, share)
		}
		other := s.client()
		answered, worst := 0, time.Duration(0)
		for _, token := range fresh {
			worst = max(worst, timed(t, "another caller", direct(t, cp, pods, token), func() {
				if a := get(t, other, "https://"+s.addr+pods, token); a.code == 200 {
					answered++
				} else {
					t.Errorf("another caller beside the passed-through watches: %d %s", a.code, a.body)
				}
			}))
		}
		grew := during.heapMiB - before.heapMiB
		cancel()
		for _, b := range open {
			b.Close()
		}
		admin.CloseIdleConnections()
		other.CloseIdleConnections()
		t.Logf("passed-through watches, %d of one account: %v; another caller answered %d of 5 within %v; heap %.1f → %.1f MiB (+%.1f), goroutines %d → %d",
			watches, codes, answered, worst, before.heapMiB, during.heapMiB, grew, before.goroutines, during.goroutines)
		if grew > 96 {
			t.Errorf("heap grew %.1f MiB under %d passed-through watches, want ≤ 96 (docs/reliability.md)", grew, codes[200])
		}
	})
}

// counting returns a client that counts in n the answers c receives.
func counting(c *http.Client, n *atomic.Int64) *http.Client {
	return &http.Client{Transport: countingTransport{c.Transport, n, 0}}
}

// throttledCounting returns a client that counts in n the 429s c
// receives.
func throttledCounting(c *http.Client, n *atomic.Int64) *http.Client {
	return &http.Client{Transport: countingTransport{c.Transport, n, http.StatusTooManyRequests}}
}

// countingTransport counts the answers of code (any code when 0).
type countingTransport struct {
	http.RoundTripper
	n    *atomic.Int64
	code int
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.RoundTripper.RoundTrip(r)
	if err == nil && (c.code == 0 || resp.StatusCode == c.code) {
		c.n.Add(1)
	}
	return resp, err
}
