package harness

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"

	"github.com/podsapi/podsapi/test/kubetest"
)

// DoorRequest is a kind of request podsapi's front door answered: its
// route ("local": the node's pods, answered by podsapi; "proxied": passed
// through to the API server) and verb, as the door labels it, as the API
// server names it: "get", "list", "watch", "create", ….
type DoorRequest struct {
	Route, Verb string
}

// DoorCounts are the front door's answered requests by route and verb
// (podsapi_kube_api_requests_total, a watch counted when it ends), plus
// those being answered now (podsapi_kube_api_requests_in_flight, open
// watches among them) by route.
type DoorCounts struct {
	Answered map[DoorRequest]float64
	InFlight map[string]float64
}

// Door reads the front door's counters from podsapi-server's /metrics, on
// its metrics socket.
func (p *Podsapi) Door(t testing.TB) DoorCounts {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", p.metrics)
	}}}
	defer client.CloseIdleConnections()
	families := scrape(t, client, "http://podsapi/metrics")
	c := DoorCounts{Answered: map[DoorRequest]float64{}, InFlight: map[string]float64{}}
	for _, m := range families["podsapi_kube_api_requests_total"].GetMetric() {
		l := labels(m)
		c.Answered[DoorRequest{l["route"], l["verb"]}] += m.GetCounter().GetValue()
	}
	for _, m := range families["podsapi_kube_api_requests_in_flight"].GetMetric() {
		c.InFlight[labels(m)["route"]] += m.GetGauge().GetValue()
	}
	return c
}

// APIServerCounts are the API server's requests for a resource, from its
// /metrics: those answered by verb (apiserver_request_total: LIST, GET,
// WATCH — a watch counted when it ends), and the watches open now
// (apiserver_longrunning_requests, verb WATCH).
type APIServerCounts struct {
	Requests    map[string]float64
	WatchesOpen float64
}

// Route returns how many requests the door answered by route ("local" or
// "proxied"), whatever their verb.
func (c DoorCounts) Route(route string) float64 {
	n := 0.0
	for k, v := range c.Answered {
		if k.Route == route {
			n += v
		}
	}
	return n
}

// APIServer reads the API server's counters of resource (such as "pods";
// the core group's and every group's of that name) from its /metrics, as
// the admin.
func (c *Cluster) APIServer(t testing.TB, resource string) APIServerCounts {
	t.Helper()
	client, err := rest.HTTPClientFor(c.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	families := scrape(t, client, "https://"+c.Host()+"/metrics")
	counts := APIServerCounts{Requests: map[string]float64{}}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		if l := labels(m); l["resource"] == resource && l["subresource"] == "" {
			counts.Requests[l["verb"]] += m.GetCounter().GetValue()
		}
	}
	for _, m := range families["apiserver_longrunning_requests"].GetMetric() {
		if l := labels(m); l["resource"] == resource && l["verb"] == "WATCH" && l["subresource"] == "" {
			counts.WatchesOpen += m.GetGauge().GetValue()
		}
	}
	return counts
}

// scrape reads the Prometheus text exposition at url.
func scrape(t testing.TB, client *http.Client, url string) map[string]*dto.MetricFamily {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kubetest.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		t.Fatalf("scrape %s: %s %s", url, resp.Status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	return families
}

func labels(m *dto.Metric) map[string]string {
	l := make(map[string]string, len(m.GetLabel()))
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// String prints the counts in a stable order, for the tests' logs.
func (c APIServerCounts) String() string {
	return fmt.Sprintf("LIST %.0f, GET %.0f, WATCH ended %.0f, watches open %.0f",
		c.Requests["LIST"], c.Requests["GET"], c.Requests["WATCH"], c.WatchesOpen)
}

// Since describes what the door answered since before, in a stable
// order: "door: local get 2, proxied get 1, ...; open: local 2".
func (c DoorCounts) Since(before DoorCounts) string {
	var parts []string
	for _, route := range []string{"local", "proxied"} {
		for _, verb := range []string{"get", "list", "watch", "create", "update", "patch", "delete", "other"} {
			k := DoorRequest{route, verb}
			if n := c.Answered[k] - before.Answered[k]; n != 0 {
				parts = append(parts, fmt.Sprintf("%s %s %v", route, verb, n))
			}
		}
	}
	var open []string
	for _, route := range []string{"local", "proxied"} {
		if n := c.InFlight[route] - before.InFlight[route]; n != 0 {
			open = append(open, fmt.Sprintf("%s %v", route, n))
		}
	}
	if len(parts) == 0 {
		parts = []string{"none"}
	}
	s := "door answered: " + strings.Join(parts, ", ")
	if len(open) > 0 {
		s += "; door requests open (watches): " + strings.Join(open, ", ")
	}
	return s
}
