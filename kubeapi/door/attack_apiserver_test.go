package door_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/kubeapi/door"
	"github.com/podsapi/podsapi/test/kubetest"
)

// The attacks a pod on the cluster network can make on the door without
// credentials (issue 40), each on loopback with bounded loops, against a
// real API server: under each, a valid caller is answered within
// validWithin, and the door's Go heap and goroutines stay within the
// bounds docs/reliability.md gives, and come back down after it.

// attackDoor serves a door in front of local whose reviews and
// pass-through go to cp's API server with the admin's credentials,
// throttled as Open throttles podsapi's own (50 a second, burst 100).
func attackDoor(t *testing.T, cp *kubetest.ControlPlane, local door.Local, cfg door.Config, opts ...door.Option) *served {
	t.Helper()
	own := cp.Config(kubetest.AdminUser, cp.Host())
	own.QPS, own.Burst = 50, 100
	auth, err := door.NewAuth(own)
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.Check(t.Context()); err != nil { // As API.Serve does first.
		t.Fatal(err)
	}
	pass, err := door.NewPassThrough(own)
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, door.New(local, append([]door.Option{door.WithAuth(auth), door.WithPassThrough(pass)}, opts...)...), cfg)
}

// freshTokens returns n tokens just issued (TokenRequest) to a service
// account of nsAllowed that may read its pods, once the API server's
// authorizer allows it.
func freshTokens(t *testing.T, cp *kubetest.ControlPlane, name string, n int) []string {
	t.Helper()
	ctx := t.Context()
	if _, err := cp.Admin.CoreV1().ServiceAccounts(nsAllowed).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Admin.RbacV1().RoleBindings(nsAllowed).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: nsAllowed}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the service account's role", func() bool {
		r, err := cp.Admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:" + nsAllowed + ":" + name,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: nsAllowed, Verb: "watch", Resource: "pods"},
		}}, metav1.CreateOptions{})
		return err == nil && r.Status.Allowed
	})
	var tokens []string
	for range n {
		secs := int64(600)
		tr, err := cp.Admin.CoreV1().ServiceAccounts(nsAllowed).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, tr.Status.Token)
	}
	// The API server's own first review of the account (its caches of the
	// account and its Secret-less tokens) is not the door's to measure.
	if _, err := cp.Admin.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tokens[0]}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return tokens
}

// http1From returns an HTTPS client of s speaking HTTP/1.1 from source
// (an address of 127.0.0.0/8), keeping up to conns connections.
func (s *served) http1From(source string, conns int) *http.Client {
	c := s.client()
	tr := c.Transport.(*http.Transport)
	tr.ForceAttemptHTTP2 = false
	tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	tr.MaxIdleConnsPerHost, tr.MaxConnsPerHost = conns, conns
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}
	tr.DialContext = d.DialContext
	return c
}

// drain keeps the watches of local ending.
func drain(t *testing.T, local *localDouble) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-local.watchEnded:
			case <-done:
				return
			}
		}
	}()
	t.Cleanup(func() { close(done); <-stopped })
}

func TestDoorAttacksAPIServer(t *testing.T) {
	cp := kubetest.Start(t, nsReader, nsLister) // grantRoles waits for both.
	grantRoles(t, cp)
	ctx := t.Context()
	fresh := freshTokens(t, cp, "fresh", 4)
	const pods = "/api/v1/namespaces/" + nsAllowed + "/pods"

	t.Run("zero receive window", func(t *testing.T) {
		// 8 connections × 250 anonymous requests passed through (the API
		// server answers 403), one connection of garbage tokens (401), one
		// of a valid caller's lists (200): none reads a byte of body.
		const conns, streams, writeTimeout = 8, 250, 2 * time.Second
		local := newLocalDouble()
		s := attackDoor(t, cp, local, door.Config{WriteTimeout: writeTimeout})
		reader := s.client()
		if a := get(t, reader, "https://"+s.addr+pods, cp.Token(nsReader)); a.code != 200 {
			t.Fatalf("valid caller before the attack: %d %s", a.code, a.body)
		}
		before := measure()
		var anon []*zeroWindow
		for range conns {
			z := dialZeroWindow(t, s, "")
			for range streams {
				z.get(t, "/api/v1/namespaces", "")
			}
			anon = append(anon, z)
		}
		garbage := dialZeroWindow(t, s, "")
		for i := range 5 { // Within this source's budget of unknown tokens.
			garbage.get(t, pods, fmt.Sprintf("garbage-%d", i))
		}
		valid := dialZeroWindow(t, s, "")
		held := valid.get(t, pods, cp.Token(nsReader))
		took := timed(t, "a valid list", direct(t, cp, pods, cp.Token(nsReader)), func() {
			if a := get(t, reader, "https://"+s.addr+pods, cp.Token(nsReader)); a.code != 200 {
				t.Errorf("valid caller under attack: %d %s", a.code, a.body)
			}
		})
		during := measure()
		// Each connection read at once, all together: a connection closed
		// with frames of the client unread is reset, and its unread frames
		// lost to the client.
		ends := make([]*zeroWindowEnd, len(anon)+1)
		var wg sync.WaitGroup
		for i, z := range append(anon, garbage) {
			wg.Go(func() { ends[i] = z.read(t, func(e *zeroWindowEnd) bool { return false }) })
		}
		wg.Wait()
		answered, goaways := 0, 0
		for i, e := range ends {
			if !e.closed {
				t.Fatalf("unauthenticated connection %d not closed", i)
			}
			// The anonymous requests are the API server's to answer: 403,
			// or, on a machine too busy for it to answer 2,000 of them in
			// time, the pass-through's 503 (or its 429); never a 2xx.
			want := map[string]bool{"403": true, "429": true, "503": true}
			if i == len(anon) {
				want = map[string]bool{"401": true}
			}
			for id, st := range e.headers {
				if !want[st] {
					t.Fatalf("connection %d stream %d: %s, want one of %v", i, id, st, want)
				}
			}
			answered += len(e.headers)
			if e.goaway {
				goaways++
			}
		}
		if answered == 0 || goaways == 0 {
			t.Fatalf("unauthenticated connections: %d answers, %d GOAWAYs before they closed; want some of each", answered, goaways)
		}
		// An authenticated connection stays, and its unread answer is
		// ended after the write timeout.
		e := valid.read(t, func(e *zeroWindowEnd) bool { return e.resets[held] })
		if e.headers[held] != "200" || e.goaway || e.closed {
			t.Fatalf("valid caller's unread list: status %q, goaway %v, closed %v; want 200, then reset", e.headers[held], e.goaway, e.closed)
		}
		after := settle(t, before, 40)
		t.Logf("zero window, %d×%d anonymous streams: valid list in %v; heap %.1f → %.1f → %.1f MiB, goroutines %d → %d → %d",
			conns, streams, took, before.heapMiB, during.heapMiB, after.heapMiB, before.goroutines, during.goroutines, after.goroutines)
		if grew := during.heapMiB - before.heapMiB; grew > 64 {
			t.Errorf("heap grew %.1f MiB under the attack, want ≤ 64 (docs/reliability.md)", grew)
		}
	})

	t.Run("idle connections", func(t *testing.T) {
		// The bound full of idle connections: half passed through one
		// anonymous GET /version over HTTP/1.1, half never sent a byte.
		const maxConns = 100
		local := newLocalDouble()
		s := attackDoor(t, cp, local, door.Config{MaxConnections: maxConns})
		before := measure()
		var idle []*http.Client
		for range maxConns/2 + 5 {
			c := s.http1From("127.0.0.2", 1)
			if a := get(t, c, "https://"+s.addr+"/version", ""); a.code != 200 {
				t.Fatalf("GET /version: %d %s", a.code, a.body)
			}
			idle = append(idle, c)
		}
		for range maxConns/2 + 5 {
			c, err := net.Dial("tcp", s.addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
		}
		during := measure()
		reader := s.client()
		took := timed(t, "a valid list", direct(t, cp, pods, cp.Token(nsReader)), func() {
			if a := get(t, reader, "https://"+s.addr+pods, cp.Token(nsReader)); a.code != 200 {
				t.Errorf("valid caller with the bound full of idle connections: %d %s", a.code, a.body)
			}
		})
		for _, c := range idle {
			c.CloseIdleConnections()
		}
		reader.CloseIdleConnections()
		t.Logf("idle connections, %d at a bound of %d: valid list in %v; heap %.1f → %.1f MiB, goroutines %d → %d",
			2*(maxConns/2+5), maxConns, took, before.heapMiB, during.heapMiB, before.goroutines, during.goroutines)
	})

	t.Run("garbage tokens", func(t *testing.T) {
		// 3,000 distinct garbage tokens from one pod (127.0.0.2), 500 at a
		// time; freshly issued valid tokens from another (127.0.0.3).
		const total, parallel = 3000, 500
		local := newLocalDouble()
		s := attackDoor(t, cp, local, door.Config{})
		// The valid callers' pod is connected already, as a client-go's is.
		valid := s.http1From("127.0.0.3", 1)
		if a := get(t, valid, "https://"+s.addr+"/version", ""); a.code != 200 {
			t.Fatalf("GET /version: %d %s", a.code, a.body)
		}
		before := measure()
		attacker := s.http1From("127.0.0.2", parallel)
		var (
			next    atomic.Int64
			mu      sync.Mutex
			codes   = map[int]int{}
			wg      sync.WaitGroup
			started = make(chan struct{})
			once    sync.Once
		)
		for range parallel {
			wg.Go(func() {
				for i := next.Add(1); i <= total; i = next.Add(1) {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+s.addr+pods, nil)
					req.Header.Set("Authorization", fmt.Sprintf("Bearer garbage-%d", i))
					resp, err := attacker.Do(req)
					if err != nil {
						// The attacker's own connections may fail on a
						// loaded machine (TLS handshakes past their 10 s):
						// counted, as code 0; the valid callers are what
						// is judged.
						mu.Lock()
						codes[0]++
						mu.Unlock()
						continue
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					mu.Lock()
					codes[resp.StatusCode]++
					if i >= parallel && codes[http.StatusTooManyRequests] > 0 {
						once.Do(func() { close(started) })
					}
					mu.Unlock()
				}
			})
		}
		// Once the attacker's connections are all open and its budget is
		// spent (a 429), valid callers come from another pod with tokens
		// never seen.
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatal("no garbage token was refused for lack of budget")
		}
		during := measure()
		var worst time.Duration
		for _, token := range fresh[:3] {
			took := timed(t, "a fresh valid token", direct(t, cp, pods, token), func() {
				if a := get(t, valid, "https://"+s.addr+pods, token); a.code != 200 {
					t.Errorf("fresh valid token under attack: %d %s", a.code, a.body)
				}
			})
			worst = max(worst, took)
		}
		sent := min(next.Load(), total)
		wg.Wait()
		attacker.CloseIdleConnections()
		valid.CloseIdleConnections()
		for code := range codes {
			if code != 0 && code != http.StatusUnauthorized && code != http.StatusTooManyRequests {
				t.Errorf("garbage tokens answered %v, want only 401 and 429 (0: no answer)", codes)
			}
		}
		after := settle(t, before, 40)
		t.Logf("garbage tokens, %d by %d: answers %v; fresh valid tokens answered within %v, with %d garbage tokens sent; heap %.1f → %.1f → %.1f MiB, goroutines %d → %d → %d",
			total, parallel, codes, worst, sent, before.heapMiB, during.heapMiB, after.heapMiB, before.goroutines, during.goroutines, after.goroutines)
	})

	t.Run("watch slots", func(t *testing.T) {
		// With 40 watches in all and the per-caller share left at its
		// default (1,000), one account opens all 40: its share follows
		// the total (half of it), and another account is still served.
		const maxWatches, share = 40, 20
		local := newLocalDouble()
		drain(t, local) // Before the door, whose stop ends the watches.
		s := attackDoor(t, cp, local, door.Config{}, door.WithMaxWatches(maxWatches, door.DefaultMaxWatchesPerCaller))
		c := s.client()
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		watch := func(token string) *http.Response {
			req, _ := http.NewRequestWithContext(wctx, http.MethodGet, "https://"+s.addr+pods+"?watch=true", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}
		codes := map[int]int{}
		for range maxWatches {
			resp := watch(cp.Token(nsReader))
			codes[resp.StatusCode]++
			if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
			if resp.StatusCode != 200 {
				resp.Body.Close()
			}
			t.Cleanup(func() { resp.Body.Close() })
		}
		if codes[200] != share || codes[http.StatusTooManyRequests] != maxWatches-share {
			t.Fatalf("one account's %d watches: %v, want %d served and the rest 429", maxWatches, codes, share)
		}
		var other *http.Response
		took := timed(t, "another account's watch", direct(t, cp, pods, fresh[3]), func() { other = watch(fresh[3]) })
		t.Cleanup(func() { other.Body.Close() })
		if other.StatusCode != 200 {
			t.Fatalf("another account's watch: %d, want 200", other.StatusCode)
		}
		t.Logf("watch slots: %v for one account, another's watch in %v", codes, took)
	})
}
