package stress

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/proto"

	"github.com/podsapi/podsapi/test/podstest"
)

// unread is the attack of a client that asks and never reads the answers.
// Each answer stays in memory until the write-stall timeout ends its
// connection (o.UnreadConns connections of o.UnreadCalls calls). First
// ListPods of a 10 MB store (50 pods of o.UnreadPadding, 200 KB): before
// the responses in flight were bounded, 200 such calls took the server
// under 256 MiB to its OOM kill in 2 s; the server must stay up with the
// responses in flight within their bound (half the memory budget),
// refusing the client's calls beyond its share. Then reflection streams
// asking for the Pod's descriptors (about 110 KB): before they were
// bounded per client, 2,000 took the server to 243 MiB; beyond 8 the
// client's are refused.
func unread(ctx context.Context, o Options, rep *Report) error {
	const name = "9 unread answers"
	c, budget, err := startBudgeted(name, rep, "--padding", fmt.Sprint(o.UnreadPadding))
	if err != nil {
		return err
	}
	defer c.kill()
	v, quietV, err := startQuietVictim(ctx, c, o)
	if err != nil {
		return err
	}
	defer v.kill()
	if err := v.start(); err != nil {
		return err
	}
	rssBefore := c.rss()
	s := startSampler(c)
	inFlightPeak, err := unreadCalls(ctx, o, c, "/kubelet.pods.v1alpha1.Pods/ListPods", nil)
	s.end()
	if err != nil {
		return err
	}
	refused, err := c.metric("podsapi_responses_refused_total")
	if err != nil {
		return fmt.Errorf("the server after the attack: %w", err)
	}
	calls := o.UnreadConns * o.UnreadCalls
	rep.add(name, fmt.Sprintf("server up after %d unread ListPods of a %s store on %d connections", calls, mib(int64(childPods*o.UnreadPadding)), o.UnreadConns), c.rss() > 0, fmt.Sprint(c.rss() > 0), "true")
	rep.add(name, "responses in flight, peak", inFlightPeak <= budget/2, mib(int64(inFlightPeak)), fmt.Sprintf("<= half the budget, %s", mib(int64(budget/2))))
	rep.add(name, "the client's ListPods refused MEMORY_BUDGET_EXCEEDED (responses)", refused > 0, fmt.Sprint(refused), "> 0")
	rep.add(name, "server RSS before / peak, unread lists", true, fmt.Sprintf("%s / %s", mib(rssBefore), mib(s.rssPeak)), "reported")

	req, err := proto.Marshal(&grpc_reflection_v1.ServerReflectionRequest{
		MessageRequest: &grpc_reflection_v1.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "k8s.io.api.core.v1.Pod"},
	})
	if err != nil {
		return err
	}
	rssBefore = c.rss()
	s = startSampler(c)
	_, err = unreadCalls(ctx, o, c, "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", req)
	s.end()
	if err != nil {
		return err
	}
	series, err := c.metricSeries("podsapi_calls_refused_total", "code")
	if err != nil {
		return fmt.Errorf("the server after the attack: %w", err)
	}
	underV, err := v.finish()
	if err != nil {
		return err
	}
	victimRows(rep, name, quietV, underV, "")
	rep.add(name, fmt.Sprintf("server RSS before / peak, %d unread reflection streams", calls), s.rssPeak-rssBefore <= 64<<20,
		fmt.Sprintf("%s / %s", mib(rssBefore), mib(s.rssPeak)), "<= before + 64 MiB (243 MiB before the bound)")
	rep.add(name, "the client's reflection streams refused RESOURCE_EXHAUSTED", series["resource_exhausted"] >= float64(calls-maxReflectionPerClient),
		fmt.Sprint(series["resource_exhausted"]), fmt.Sprintf(">= %d (all but 8)", calls-maxReflectionPerClient))
	return nil
}

// maxReflectionPerClient is the server's bound of one client's reflection
// streams.
const maxReflectionPerClient = 8

// unreadCalls opens o.UnreadConns connections, one a second, each with
// o.UnreadCalls calls of path with the request req (nil: empty), whose
// answers it never reads; it returns the peak of the responses in flight
// it saw. The connections are closed when it returns.
func unreadCalls(ctx context.Context, o Options, c *child, path string, req []byte) (float64, error) {
	var conns []net.Conn
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	envelope := podstest.Envelope(0, req)
	var peak float64
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for range o.UnreadConns {
		nc, err := net.Dial("unix", c.socket)
		if err != nil {
			return peak, err
		}
		conns = append(conns, nc)
		h := newH2Conn(nc, nil) // its answers are never read
		if err := h.preface(); err != nil {
			return peak, err
		}
		for i := range o.UnreadCalls {
			id := uint32(2*i + 1)
			if err := h.request(id, path, 0); err != nil {
				return peak, err
			}
			if err := h.fr.WriteData(id, true, envelope); err != nil {
				return peak, err
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return peak, ctx.Err()
		}
		if v, err := c.metric("podsapi_responses_in_flight_bytes"); err == nil {
			peak = max(peak, v)
		}
	}
	return peak, nil
}
