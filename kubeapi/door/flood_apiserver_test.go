package door_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/kubeapi/door"
	"github.com/podsapi/podsapi/test/kubetest"
)

// The attacks of issue 47 on the door's connections, on loopback against a
// real API server: floods of requests without valid credentials that the
// door holds (its tarpit, a body never sent) must not hold out a valid
// caller, and a bad request on an HTTP/2 connection must not end the
// authenticated streams on it.

// floodHeapMiB bounds the heap growth of the test process under a flood of
// 1,024 connections: the door's 64 MiB, and the attacker's 1,024 TLS
// clients, which the process holds too (about 20 KiB each).
const floodHeapMiB = 96

// floodConns returns the attacking connections of the floods: the issue's
// 1,024 (the door's default connection bound), or PODSAPI_DOOR_FLOOD_CONNS.
func floodConns(t *testing.T) int {
	if v := os.Getenv("PODSAPI_DOOR_FLOOD_CONNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("PODSAPI_DOOR_FLOOD_CONNS=%q: want a positive number", v)
		}
		return n
	}
	return door.DefaultMaxConnections
}

// gauge returns the value of a metric of reg without labels, 0 if absent.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			m := mf.GetMetric()[0]
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// tlsDial opens a TLS connection to s speaking HTTP/1.1, from source.
func (s *served) tlsDial(t *testing.T, source string) (*tls.Conn, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.ca)
	d := &net.Dialer{Timeout: 30 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}
	return tls.DialWithDialer(d, "tcp", s.addr, &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})
}

// validCallers has n new valid callers (each a new connection, from
// 127.0.0.3) list pods, with the tokens given in turn, and fails the test
// unless each is answered 200 within validWithin of the API server of cp
// (timed); it returns the slowest.
func validCallers(t *testing.T, cp *kubetest.ControlPlane, s *served, tokens []string, n int) time.Duration {
	t.Helper()
	var worst time.Duration
	const pods = "/api/v1/namespaces/" + nsAllowed + "/pods"
	for i := range n {
		c := s.http1From("127.0.0.3", 1)
		took := timed(t, fmt.Sprintf("valid caller %d of %d", i+1, n), direct(t, cp, pods, tokens[i%len(tokens)]), func() {
			if a := get(t, c, "https://"+s.addr+pods, tokens[i%len(tokens)]); a.code != 200 {
				t.Errorf("valid caller %d of %d: %d %s", i+1, n, a.code, a.body)
			}
		})
		c.CloseIdleConnections()
		worst = max(worst, took)
	}
	return worst
}

// attacker is a client of raw HTTP/1.1 over TLS from 127.0.0.2, with the
// least memory a client needs (a TLS connection and a 4 KiB reader), so
// that the test process's heap is mostly the door's.
type attacker struct {
	s   *served
	c   *tls.Conn
	rd  *bufio.Reader
	err error
}

// ask sends req (its bytes), on a new connection if there is none, and
// returns the status of the answer ("none" if the connection ended first)
// and whether the connection was closed after it.
func (a *attacker) ask(t *testing.T, req string) (status string, closed bool) {
	if !a.send(t, req) {
		return "none", true
	}
	return a.answer()
}

// send sends req, on a new connection if there is none, and reports
// whether it was written.
func (a *attacker) send(t *testing.T, req string) bool {
	if a.c == nil {
		if a.c, a.err = a.s.tlsDial(t, "127.0.0.2"); a.err != nil {
			a.c = nil
			return false
		}
		a.rd = bufio.NewReaderSize(a.c, 4<<10)
	}
	_ = a.c.SetDeadline(time.Now().Add(2 * time.Minute))
	if _, err := io.WriteString(a.c, req); err != nil {
		a.close()
		return false
	}
	return true
}

// answer reads the answer to the request sent.
func (a *attacker) answer() (status string, closed bool) {
	resp, err := http.ReadResponse(a.rd, nil)
	if err != nil {
		a.close()
		return "none", true
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Close {
		a.close()
		return strconv.Itoa(resp.StatusCode), true
	}
	return strconv.Itoa(resp.StatusCode), false
}

// waitClosed waits for the door to close the connection, and reports
// whether it did within the connection's deadline.
func (a *attacker) waitClosed() bool {
	if a.c == nil {
		return true
	}
	_, err := a.rd.ReadByte()
	a.close()
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

func (a *attacker) close() {
	if a.c != nil {
		a.c.Close()
		a.c = nil
	}
}

func TestDoorFloodsAPIServer(t *testing.T) {
	cp := kubetest.Start(t, nsReader, nsLister, nobody)
	grantRoles(t, cp)
	fresh := freshTokens(t, cp, "flood", 5)
	// Tokens seen before (the reader's, once answered) and never seen.
	tokens := []string{cp.Token(nsReader), fresh[0], cp.Token(nsReader), fresh[1], cp.Token(nsReader), fresh[2], cp.Token(nsReader), fresh[3], cp.Token(nsReader), fresh[4]}
	const pods = "/api/v1/namespaces/" + nsAllowed + "/pods"
	n := floodConns(t)

	t.Run("garbage tokens on keep-alive connections", func(t *testing.T) {
		// n keep-alive HTTP/1.1 connections from 127.0.0.2 at the bound,
		// each sending one garbage token a second: most wait 1 s in the
		// tarpit for their 429, and their connections stay busy.
		reg := prometheus.NewRegistry()
		s := attackDoor(t, cp, newLocalDouble(), door.Config{MaxConnections: n, Registerer: reg})
		before := measure()
		ctx, stop := context.WithCancel(t.Context())
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			codes   = map[string]int{}
			started atomic.Int64
		)
		for g := range n {
			wg.Go(func() {
				a := &attacker{s: s}
				defer a.close()
				tick := time.NewTicker(time.Second)
				defer tick.Stop()
				for i := 0; ; i++ {
					code, _ := a.ask(t, fmt.Sprintf("GET %s HTTP/1.1\r\nHost: door\r\nAuthorization: Bearer garbage-%d-%d\r\n\r\n", pods, g, i))
					if i == 0 {
						started.Add(1)
					}
					mu.Lock()
					codes[code]++
					mu.Unlock()
					select {
					case <-ctx.Done():
						return
					case <-tick.C:
					}
				}
			})
		}
		// Every attacker has been answered once, and the bound is full.
		waitUntil(t, "every attacker answered once and the bound full", func() bool {
			return started.Load() == int64(n) && gauge(t, reg, "podsapi_kube_api_connections_open") >= float64(n)
		})
		during := measure()
		worst := validCallers(t, cp, s, tokens, 10)
		stop()
		wg.Wait()
		after := settle(t, before, 40)
		shed := gauge(t, reg, "podsapi_kube_api_connections_shed_total")
		rejected := gauge(t, reg, "podsapi_kube_api_connections_rejected_total")
		if shed == 0 {
			t.Errorf("no connection shed for the valid callers")
		}
		t.Logf("garbage tokens on %d keep-alive connections, 1/s each: 10 of 10 valid callers answered within %v; attackers' answers %v; connections shed %v, refused %v; heap %.1f → %.1f → %.1f MiB, goroutines %d → %d → %d",
			n, worst, codes, shed, rejected, before.heapMiB, during.heapMiB, after.heapMiB, before.goroutines, during.goroutines, after.goroutines)
		if grew := during.heapMiB - before.heapMiB; grew > floodHeapMiB {
			t.Errorf("heap grew %.1f MiB under the attack, want ≤ %d (docs/reliability.md)", grew, floodHeapMiB)
		}
	})

	t.Run("bodies never sent", func(t *testing.T) {
		// n connections from 127.0.0.2, each sending a garbage token in a
		// request that declares a 1-byte body and never sends it.
		// Longer than dialling them all takes on a busy machine, so that
		// the valid callers come while they are held.
		const bodyTimeout = 20 * time.Second
		reg := prometheus.NewRegistry()
		s := attackDoor(t, cp, newLocalDouble(), door.Config{MaxConnections: n, BodyTimeout: bodyTimeout, Registerer: reg})
		before := measure()
		// Each attacker sends its request once, then waits for the door to
		// end its connection.
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			answers = map[string]int{}
			latest  time.Duration
			sentAll sync.WaitGroup
		)
		sentAll.Add(n)
		for g := range n {
			wg.Go(func() {
				a := &attacker{s: s}
				defer a.close()
				sent := time.Now()
				ok := a.send(t, fmt.Sprintf("GET %s HTTP/1.1\r\nHost: door\r\nAuthorization: Bearer garbage-%d\r\nContent-Length: 1\r\n\r\n", pods, g))
				sentAll.Done()
				status, closed := "none", true
				if ok {
					// Answered once the body's deadline has passed.
					status, closed = a.answer()
				}
				if !closed && !a.waitClosed() {
					t.Errorf("attacker %d's connection still open 2 minutes on", g)
				}
				took := time.Since(sent)
				mu.Lock()
				answers[status]++
				latest = max(latest, took)
				mu.Unlock()
			})
		}
		sentAll.Wait()
		held := gauge(t, reg, "podsapi_kube_api_connections_open")
		during := measure()
		worst := validCallers(t, cp, s, tokens, 10)
		wg.Wait()
		after := settle(t, before, 40)
		for st := range answers {
			if st != "429" && st != "401" && st != "none" {
				t.Errorf("attackers answered %v, want 429, 401 or no answer (shed)", answers)
			}
		}
		if answers["429"]+answers["401"] == 0 {
			t.Errorf("no attacker answered: %v", answers)
		}
		t.Logf("bodies never sent on %d connections (%v held when all were sent), body timeout %v: 10 of 10 valid callers answered within %v; attackers %v, the slowest connection ended %v after its request; shed %v; heap %.1f → %.1f → %.1f MiB, goroutines %d → %d → %d",
			n, held, bodyTimeout, worst, answers, latest.Round(time.Millisecond), gauge(t, reg, "podsapi_kube_api_connections_shed_total"),
			before.heapMiB, during.heapMiB, after.heapMiB, before.goroutines, during.goroutines, after.goroutines)
		if grew := during.heapMiB - before.heapMiB; grew > floodHeapMiB {
			t.Errorf("heap grew %.1f MiB under the attack, want ≤ %d (docs/reliability.md)", grew, floodHeapMiB)
		}
	})

	t.Run("anonymous request beside a watch", func(t *testing.T) {
		// An authenticated watch on an HTTP/2 connection, then an
		// anonymous GET /version on the same connection: the door sends
		// GOAWAY, as the API server does, and the watch stays open past
		// the grace (1 s) three times over.
		local := newLocalDouble()
		s := attackDoor(t, cp, local, door.Config{})
		c := s.client()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+s.addr+pods+"?watch=true", nil)
		req.Header.Set("Authorization", "Bearer "+cp.Token(nsReader))
		watch, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer watch.Body.Close()
		if watch.StatusCode != 200 || watch.ProtoMajor != 2 {
			t.Fatalf("watch: %s %s", watch.Proto, watch.Status)
		}
		var reused bool
		vctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }})
		vreq, _ := http.NewRequestWithContext(vctx, http.MethodGet, "https://"+s.addr+"/version", nil)
		version, err := c.Do(vreq)
		if err != nil {
			t.Fatal(err)
		}
		version.Body.Close()
		if version.StatusCode != 200 || !reused {
			t.Fatalf("anonymous /version: %s, on the watch's connection %v", version.Status, reused)
		}
		outlive := 3 * door.DefaultUnauthenticatedGrace
		select {
		case err := <-local.watchEnded:
			t.Fatalf("the authenticated watch ended (%v) after an anonymous request on its connection", err)
		case <-time.After(outlive):
		}
		cancel()
		<-local.watchEnded
		t.Logf("anonymous request beside a watch: the watch still open %v after the GOAWAY", outlive)
	})

	t.Run("stalled watch", func(t *testing.T) {
		// A valid caller's watch of the node's pods whose client never
		// grants a byte of window: ended after the write timeout, and
		// counted stalled.
		rig := newWatchRigOn(t, cp, 3, shortWrite, shortBookmark)
		z := dialZeroWindow(t, rig.s, "")
		start := time.Now()
		z.get(t, pods+"?watch=true&fieldSelector="+pinned, cp.Token(nsReader))
		waitUntil(t, "the stalled watch to end", func() bool {
			return rig.watchesEnded(t, "stalled")+rig.watchesEnded(t, "cancelled") > 0
		})
		took := time.Since(start)
		if got := rig.watchesEnded(t, "stalled"); got != 1 {
			t.Fatalf("watches ended stalled: %d (cancelled: %d), want 1", got, rig.watchesEnded(t, "cancelled"))
		}
		if took < shortWrite {
			t.Fatalf("the watch ended after %v, before the write timeout %v", took, shortWrite)
		}
		t.Logf("stalled watch: counted stalled %v after it began, write timeout %v", took.Round(time.Millisecond), shortWrite)
	})
}
