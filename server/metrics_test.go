package server_test

import (
	"maps"
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// storeWith returns a synced store holding pods.
func storeWith(pods ...*corev1.Pod) *store.Store {
	st := store.New()
	for _, p := range pods {
		st.Upsert(p)
	}
	st.MarkSynced()
	return st
}

// TestMetrics makes a known sequence of requests and reads /metrics over
// HTTP.
func TestMetrics(t *testing.T) {
	pods := podstest.SamplePods()
	f := start(t, server.Config{Limits: server.LimitsConfig{QPS: 1e-6, Burst: 6}, Metrics: server.MetricsConfig{Address: "127.0.0.1:0"}}, true, pods...)
	c := podstest.ClientKinds[1].Dial(t, f.socket)
	call := func(err error, want connect.Code) {
		t.Helper()
		if podstest.ErrorCode(err) != want {
			t.Fatalf("got %v, want %v", err, want)
		}
	}
	_, err := c.List(ctx(t), nil)
	call(err, connect.CodeFailedPrecondition)
	f.store.MarkSynced()
	_, err = c.List(ctx(t), nil)
	call(err, 0)
	_, err = c.List(ctx(t), nil)
	call(err, 0)
	_, err = c.Get(ctx(t), string(pods[0].UID), nil)
	call(err, 0)
	_, err = c.Get(ctx(t), "missing", nil)
	call(err, connect.CodeNotFound)
	_, err = c.Get(ctx(t), "", nil)
	call(err, connect.CodeInvalidArgument)
	_, err = c.List(ctx(t), podstest.MaskHeader("bogus"))
	call(err, connect.CodeInvalidArgument)
	_, err = c.List(ctx(t), nil)
	call(err, connect.CodeResourceExhausted)
	w, err := c.Watch(ctx(t), podstest.MaskHeader("bogus"))
	if err == nil {
		_, err = w.Recv()
	}
	call(err, connect.CodeInvalidArgument)

	resp, err := http.Get("http://" + f.srv.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]float64{
		"kubelet_pod_requests_total": {
			"OK": 3, "FailedPrecondition": 1, "NotFound": 1, "InvalidArgument": 3, "ResourceExhausted": 1,
		},
		"kubelet_pod_requests_list_total": {
			"OK": 2, "FailedPrecondition": 1, "InvalidArgument": 1, "ResourceExhausted": 1,
		},
		"kubelet_pod_requests_get_total":   {"OK": 1, "NotFound": 1, "InvalidArgument": 1},
		"kubelet_pod_requests_watch_total": {"OK": 0, "InvalidArgument": 1},
	}
	for name, codes := range want {
		fam, ok := families[name]
		if !ok {
			t.Fatalf("/metrics has no %s", name)
		}
		got := map[string]float64{}
		for _, m := range fam.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["server_api_version"] != "v1alpha1" {
				t.Errorf("%s has server_api_version %q", name, labels["server_api_version"])
			}
			got[labels["status_code"]] = m.GetCounter().GetValue()
		}
		if !maps.Equal(got, codes) {
			t.Errorf("%s by status_code = %v, want %v", name, got, codes)
		}
	}
	if v := families["kubelet_pod_watch_events_dropped_total"]; v == nil || v.GetMetric()[0].GetCounter().GetValue() != 0 {
		t.Errorf("kubelet_pod_watch_events_dropped_total = %v, want 0", v)
	}
	for _, name := range []string{"go_goroutines", "process_open_fds"} {
		if _, ok := families[name]; !ok {
			t.Errorf("/metrics has no %s", name)
		}
	}
}

// TestSharedViews checks, through the counters, that a response or event is
// built once and shared: by polling clients of an unchanged node, and by
// watchers using the same mask.
func TestSharedViews(t *testing.T) {
	reg := prometheus.NewRegistry()
	pods := podstest.SamplePods()
	f := start(t, server.Config{Registry: reg, Limits: server.LimitsConfig{QPS: -1}}, false, pods...)
	c := podstest.ClientKinds[0].Dial(t, f.socket)
	view := func(name, kind string) float64 {
		return podstest.MetricValue(t, reg, name, map[string]string{"view": kind})
	}
	for range 5 {
		if _, err := c.List(ctx(t), podstest.MaskHeader("status.phase")); err != nil {
			t.Fatal(err)
		}
	}
	if computes, hits := view("podsapi_view_computes_total", "list"), view("podsapi_view_cache_hits_total", "list"); computes != 1 || hits != 4 {
		t.Fatalf("5 equal lists: %v list computes and %v hits, want 1 and 4", computes, hits)
	}
	if computes := view("podsapi_view_computes_total", "mask"); computes != float64(len(pods)) {
		t.Fatalf("%v masked pod views computed, want one per pod (%d)", computes, len(pods))
	}

	const watchers = 4
	var streams []podstest.WatchStream
	for range watchers {
		w, err := c.Watch(ctx(t), podstest.MaskHeader("status.phase"))
		if err != nil {
			t.Fatal(err)
		}
		for range len(pods) + 1 {
			podstest.Recv(t, w)
		}
		streams = append(streams, w)
	}
	before := view("podsapi_view_computes_total", "watch")
	encodes := podstest.MetricValue(t, reg, "podsapi_pod_encodes_total", nil)
	p := pods[0].DeepCopy()
	p.Status.Phase = corev1.PodFailed
	f.store.Upsert(p)
	for _, w := range streams {
		podstest.Recv(t, w)
	}
	if got := view("podsapi_view_computes_total", "watch") - before; got != 1 {
		t.Fatalf("one change seen by %d watchers with one mask: %v watch events built, want 1", watchers, got)
	}
	if got := podstest.MetricValue(t, reg, "podsapi_pod_encodes_total", nil) - encodes; got != 1 {
		t.Fatalf("one change: %v pod encodes, want 1", got)
	}
}
