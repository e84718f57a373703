package stress

import (
	"context"
	"fmt"
	"net"
	"time"
)

// The unread-lists attack: its connections and the calls on each.
const (
	unreadConns        = 15
	unreadCallsPerConn = 100
)

// unread is the attack of a client that asks for lists and never reads
// them: one connection a second, each with unreadCallsPerConn ListPods of a
// 10 MB store (50 pods of 200 KB), none read. Each answer stays in memory
// until the write-stall timeout ends its connection; before the responses
// in flight were bounded, 200 such calls took the server under 256 MiB to
// its OOM kill in 2 s. The server must stay up with the bytes of responses
// in flight within their bound (half the memory budget), refusing the
// client's calls beyond its share.
func unread(ctx context.Context, o Options, rep *Report) error {
	const name = "9 unread lists"
	c, budget, err := startBudgeted(name, rep, "--padding", fmt.Sprint(200<<10))
	if err != nil {
		return err
	}
	defer c.kill()
	rssBefore := c.rss()
	var conns []net.Conn
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	s := startSampler(c)
	var inFlightPeak float64
	empty := []byte{0, 0, 0, 0, 0} // an empty PodListRequest's envelope
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for range unreadConns {
		nc, err := net.Dial("unix", c.socket)
		if err != nil {
			s.end()
			return err
		}
		conns = append(conns, nc)
		h := newH2Conn(nc, nil) // its answers are never read
		if err := h.preface(); err != nil {
			s.end()
			return err
		}
		for i := range unreadCallsPerConn {
			id := uint32(2*i + 1)
			if err := h.request(id, "/kubelet.pods.v1alpha1.Pods/ListPods", 0); err != nil {
				s.end()
				return err
			}
			if err := h.fr.WriteData(id, true, empty); err != nil {
				s.end()
				return err
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			s.end()
			return ctx.Err()
		}
		if v, err := c.metric("podsapi_responses_in_flight_bytes"); err == nil {
			inFlightPeak = max(inFlightPeak, v)
		}
	}
	s.end()
	alive := c.rss() > 0
	refused, err := c.metric("podsapi_responses_refused_total")
	if err != nil {
		return fmt.Errorf("the server after the attack: %w", err)
	}
	rep.add(name, fmt.Sprintf("server up after %d unread ListPods of a 10 MB store on %d connections", unreadConns*unreadCallsPerConn, unreadConns), alive, fmt.Sprint(alive), "true")
	rep.add(name, "responses in flight, peak", inFlightPeak <= budget/2, mib(int64(inFlightPeak)), fmt.Sprintf("<= half the budget, %s", mib(int64(budget/2))))
	rep.add(name, "the client's calls refused MEMORY_BUDGET_EXCEEDED (responses)", refused > 0, fmt.Sprint(refused), "> 0")
	rep.add(name, "server RSS before / peak", true, fmt.Sprintf("%s / %s", mib(rssBefore), mib(s.rssPeak)), "reported")
	return nil
}
