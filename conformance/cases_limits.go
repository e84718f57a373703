package conformance

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// rawList calls ListPods once, unpaced.
func (c *C) rawList(h http.Header) error {
	return c.call(describe("ListPods", h, ""), func(ctx context.Context) error {
		_, err := c.env.client.list(ctx, h)
		return err
	})
}

// rawGet calls GetPod once, unpaced.
func (c *C) rawGet(uid string, h http.Header) error {
	return c.call(describe("GetPod", h, "podUID="+uid), func(ctx context.Context) error {
		_, err := c.env.client.get(ctx, uid, h)
		return err
	})
}

// uidMask is a field mask that keeps the responses of the rate limit cases
// small, or nil when the features declare no field masks.
func (c *C) uidMask() http.Header {
	if !c.env.cfg.Features.FieldMasks {
		return nil
	}
	return textMask("metadata.uid")
}

// refill waits until the declared bucket is full again: a real wait for the
// implementation's limiter, bounded by the declared rate.
func (c *C) refill() {
	rl := c.env.cfg.Features.RateLimit
	if rl.QPS <= 0 {
		return
	}
	d := time.Duration(float64(rl.Burst+1) / rl.QPS * float64(time.Second))
	select {
	case <-c.ctx.Done():
		c.Fatalf("interrupted")
	case <-time.After(d):
	}
}

// burst makes n calls with f at once, concurrently, and returns how many
// succeeded (or were answered other than RESOURCE_EXHAUSTED) and the first
// unexpected error. Concurrent calls reach the implementation within a short
// window however slow each call is on a busy machine, so that the bucket
// does not refill between them as it would between sequential calls. The
// calls are bounded by EventTimeout, as any call of the suite.
func (c *C) burst(n int, f func(ctx context.Context) error) (ok, limited int, unexpected error) {
	if msg, known := c.env.defect(noAnswer); known {
		c.Failf(fmt.Sprintf("%d calls at once", n), "answers", "not attempted: "+msg)
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.recvTimeout())
	defer cancel()
	errs := make([]error, n)
	startC := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-startC
			errs[i] = f(ctx)
		})
	}
	close(startC)
	wg.Wait()
	if ctx.Err() == context.DeadlineExceeded && c.ctx.Err() == nil {
		c.env.seen(noAnswer, fmt.Sprintf("%d calls at once got no answer within %s (case %s)", n, c.recvTimeout(), c.id))
		c.Failf(fmt.Sprintf("%d calls at once", n), "answers within "+c.recvTimeout().String(), "none")
	}
	for _, err := range errs {
		switch codeOf(err) {
		case connect.CodeResourceExhausted:
			limited++
		case 0, connect.CodeNotFound:
			ok++
		default:
			if unexpected == nil {
				unexpected = err
			}
		}
	}
	return ok, limited, unexpected
}

// listCall and getCall are the calls of the bursts.
func (c *C) listCall(ctx context.Context) error {
	_, err := c.env.client.list(ctx, c.uidMask())
	return err
}

func (c *C) getCall(uid string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		_, err := c.env.client.get(ctx, uid, nil)
		return err
	}
}

// exhaust empties the declared bucket with ListPods calls.
func (c *C) exhaust() {
	rl := c.env.cfg.Features.RateLimit
	_, limited, _ := c.burst(rl.Burst*3+10, c.listCall)
	if limited == 0 {
		c.Logf("ListPods was not rate limited while exhausting the bucket")
	}
}

// checkBurst checks one rate-limited RPC.
func (c *C) checkBurst(rpc string, f func(ctx context.Context) error) {
	rl := c.env.cfg.Features.RateLimit
	c.refill()
	n := rl.Burst*3 + 10
	start := time.Now()
	ok, limited, unexpected := c.burst(n, f)
	elapsed := time.Since(start)
	req := fmt.Sprintf("%d %s calls at once, in %s (declared: %v qps, burst %d)", n, rpc, elapsed.Round(time.Millisecond), rl.QPS, rl.Burst)
	if unexpected != nil {
		c.Failf(req, "OK or RESOURCE_EXHAUSTED", codeName(unexpected))
	}
	// The bucket may refill during the burst.
	allowed := rl.Burst + int(elapsed.Seconds()*rl.QPS) + 1
	if limited == 0 || ok > allowed {
		c.Failf(req, fmt.Sprintf("at most %d answered, the others RESOURCE_EXHAUSTED", allowed), fmt.Sprintf("%d answered, %d RESOURCE_EXHAUSTED", ok, limited))
	}
	if ok < min(rl.Burst, n) && elapsed < time.Second {
		c.Failf(req, fmt.Sprintf("the first %d calls (the burst) answered", rl.Burst), fmt.Sprintf("%d answered", ok))
	}
	c.refill()
}

func registerLimitCases() {
	unknown := func(c *C) string { return "00000000-0000-4000-8000-" + c.env.runID + "beef" }
	register("RateLimit/ListPods",
		"ListPods calls beyond the declared burst MUST fail with RESOURCE_EXHAUSTED.",
		needs(NeedRateLimit), func(c *C) {
			c.checkBurst("ListPods", c.listCall)
		})
	register("RateLimit/GetPod",
		"GetPod calls beyond the declared burst MUST fail with RESOURCE_EXHAUSTED.",
		needs(NeedRateLimit), func(c *C) {
			uid := unknown(c)
			c.checkBurst("GetPod", c.getCall(uid))
		})
	register("RateLimit/Shared",
		"ListPods and GetPod MUST share one rate limit: together they are answered no more often than the declared burst and rate allow, and GetPod fails with RESOURCE_EXHAUSTED once ListPods has exhausted it.",
		needs(NeedRateLimit), func(c *C) {
			c.refill()
			rl := c.env.cfg.Features.RateLimit
			uid := unknown(c)
			n := rl.Burst*3 + 10
			// Counted over both bursts: an implementation may delay its
			// refusals, and the bucket refills meanwhile; separate buckets
			// would answer a second burst on top of it.
			start := time.Now()
			okList, _, errList := c.burst(n, c.listCall)
			okGet, limited, errGet := c.burst(n, c.getCall(uid))
			elapsed := time.Since(start)
			allowed := rl.Burst + int(elapsed.Seconds()*rl.QPS) + 1
			if unexpected := cmp.Or(errList, errGet); unexpected != nil || limited == 0 || okList+okGet > allowed {
				c.Failf(fmt.Sprintf("%d ListPods at once, then %d GetPod at once, in %s (declared: %v qps, burst %d)", n, n, elapsed.Round(time.Millisecond), rl.QPS, rl.Burst),
					fmt.Sprintf("at most %d answered in all, GetPod RESOURCE_EXHAUSTED", allowed),
					fmt.Sprintf("%d ListPods and %d GetPod answered, %d GetPod RESOURCE_EXHAUSTED, error %v", okList, okGet, limited, cmp.Or(errList, errGet)))
			}
			c.refill()
		})
	register("RateLimit/Refill",
		"Tokens MUST refill at the declared rate: after exhausting the limit and waiting for a few tokens, calls succeed again.",
		needs(NeedRateLimit), func(c *C) {
			rl := c.env.cfg.Features.RateLimit
			if rl.QPS < 2 {
				c.Skipf("the declared rate (%v qps) is too low to check quickly", rl.QPS)
			}
			c.refill()
			c.exhaust()
			wait := time.Duration(3 / rl.QPS * float64(time.Second))
			select {
			case <-c.ctx.Done():
				c.Fatalf("interrupted")
			case <-time.After(wait):
			}
			ok, limited, unexpected := c.burst(3, c.listCall)
			if ok == 0 || unexpected != nil {
				c.Failf(fmt.Sprintf("3 ListPods calls %s after exhausting the rate limit (declared %v qps)", wait, rl.QPS),
					"at least one OK", fmt.Sprintf("%d OK, %d RESOURCE_EXHAUSTED, error %v", ok, limited, unexpected))
			}
			c.refill()
		})
	register("Metrics/Names",
		"The metrics endpoint MUST export kubelet_pod_requests_total, kubelet_pod_requests_list_total, kubelet_pod_requests_get_total and kubelet_pod_requests_watch_total with labels server_api_version and status_code, and kubelet_pod_watch_events_dropped_total.",
		needs(NeedMetrics), func(c *C) {
			c.list(nil)
			c.get("", nil)
			if c.env.cfg.Features.FieldMasks {
				w := c.watch(textMask("metadata.nosuchfield"))
				w.next(c.recvTimeout())
			} else {
				// A watch is counted when it ends.
				w := c.watch(nil)
				w.initial()
				w.close()
			}
			c.scrapeUntil("a WatchPods call counted in kubelet_pod_requests_watch_total", func(m metrics) bool {
				return m["kubelet_pod_requests_watch_total"] != nil
			})
			m := c.scrape()
			for _, name := range requestMetrics {
				fam := m[name]
				if fam == nil || len(fam.GetMetric()) == 0 {
					c.Failf("scrape "+c.env.cfg.MetricsURL, name+" exported", "absent")
				}
				for _, s := range fam.GetMetric() {
					var labels []string
					for _, l := range s.GetLabel() {
						labels = append(labels, l.GetName())
					}
					slices.Sort(labels)
					if !slices.Equal(labels, []string{"server_api_version", "status_code"}) {
						c.Failf("scrape "+c.env.cfg.MetricsURL, name+" with labels server_api_version, status_code", fmt.Sprint(labels))
					}
				}
			}
			if m["kubelet_pod_watch_events_dropped_total"] == nil {
				c.Failf("scrape "+c.env.cfg.MetricsURL, "kubelet_pod_watch_events_dropped_total exported", "absent")
			}
		})
	register("Metrics/Counts",
		"The request metrics MUST grow by exactly the requests made, per RPC and status_code (gRPC code names such as OK, NotFound).",
		needs(NeedMetrics), func(c *C) {
			c.refill()
			before := c.scrape()
			// A known sequence, within the burst.
			want := map[string]map[string]float64{
				"kubelet_pod_requests_list_total":  {"OK": 2},
				"kubelet_pod_requests_get_total":   {"NotFound": 1},
				"kubelet_pod_requests_watch_total": {},
				"kubelet_pod_requests_total":       {"OK": 2, "NotFound": 1},
			}
			inc := func(name, code string) { want[name][code]++; want["kubelet_pod_requests_total"][code]++ }
			request := "ListPods OK, ListPods OK, GetPod unknown UID"
			_ = c.rawList(nil)                                               // OK
			_ = c.rawList(nil)                                               // OK
			_ = c.rawGet("00000000-0000-4000-8000-"+c.env.runID+"f00d", nil) // NotFound
			if c.env.cfg.Wire == WirePodsAPI {
				// The code of an empty UID is the wire's (GetPod/EmptyUID*):
				// counted on the typed wire only, where it is another code.
				request += ", GetPod empty UID"
				_ = c.rawGet("", nil) // InvalidArgument
				inc("kubelet_pod_requests_get_total", "InvalidArgument")
			}
			if c.env.cfg.Features.FieldMasks {
				request += ", ListPods bad mask, WatchPods bad mask"
				_ = c.rawList(textMask("metadata.nosuchfield")) // InvalidArgument
				inc("kubelet_pod_requests_list_total", "InvalidArgument")
				w := c.watch(textMask("spec.nosuchfield"))
				w.next(c.recvTimeout()) // InvalidArgument
				inc("kubelet_pod_requests_watch_total", "InvalidArgument")
			}
			after := c.scrape()
			var diffs []string
			for name, codes := range want {
				for _, code := range []string{"OK", "InvalidArgument", "NotFound", "ResourceExhausted", "FailedPrecondition"} {
					l := map[string]string{"server_api_version": "v1alpha1", "status_code": code}
					got := after.value(name, l) - before.value(name, l)
					if got != codes[code] {
						diffs = append(diffs, fmt.Sprintf("%s{status_code=%q} grew by %v, want %v", name, code, got, codes[code]))
					}
				}
			}
			if len(diffs) > 0 {
				c.Failf(request,
					"each counted once with its code and server_api_version=\"v1alpha1\"", strings.Join(diffs, "; "))
			}
			c.refill()
		})
}

var requestMetrics = []string{"kubelet_pod_requests_total", "kubelet_pod_requests_list_total", "kubelet_pod_requests_get_total", "kubelet_pod_requests_watch_total"}

// metrics is a scrape.
type metrics map[string]*dto.MetricFamily

// scrape reads the metrics endpoint.
func (c *C) scrape() metrics {
	req, err := http.NewRequestWithContext(c.ctx, http.MethodGet, c.env.cfg.MetricsURL, nil)
	if err != nil {
		c.Fatalf("metrics URL %q: %v", c.env.cfg.MetricsURL, err)
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.Fatalf("scrape %s: %v", c.env.cfg.MetricsURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		c.Fatalf("scrape %s: %s: %s", c.env.cfg.MetricsURL, resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		c.Fatalf("scrape %s: %v", c.env.cfg.MetricsURL, err)
	}
	return metrics(fams)
}

// scrapeUntil scrapes until ok holds, bounded by EventTimeout: a metric may
// be updated just after the answer it counts.
func (c *C) scrapeUntil(what string, ok func(metrics) bool) metrics {
	deadline := time.Now().Add(c.recvTimeout())
	for {
		m := c.scrape()
		if ok(m) {
			return m
		}
		if time.Now().After(deadline) {
			c.Failf("scrape "+c.env.cfg.MetricsURL, what+" within "+c.recvTimeout().String(), "not yet")
		}
		select {
		case <-c.ctx.Done():
			c.Fatalf("interrupted")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// value returns the value of the sample of name with labels (nil: the
// sample without labels), 0 when absent.
func (m metrics) value(name string, labels map[string]string) float64 {
	fam := m[name]
	for _, s := range fam.GetMetric() {
		if len(s.GetLabel()) != len(labels) {
			continue
		}
		match := true
		for _, l := range s.GetLabel() {
			if labels[l.GetName()] != l.GetValue() {
				match = false
			}
		}
		if match {
			switch {
			case s.GetCounter() != nil:
				return s.GetCounter().GetValue()
			case s.GetGauge() != nil:
				return s.GetGauge().GetValue()
			case s.GetUntyped() != nil:
				return s.GetUntyped().GetValue()
			}
		}
	}
	return 0
}
