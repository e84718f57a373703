package service_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/podsapi/podsapi/errinfo"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// These tests check selectors, revisions, resume and progress marks
// (issue 16) over real sockets, with both clients.

func TestListSelectors(t *testing.T) {
	f := start(t, server.Config{Limits: server.LimitsConfig{QPS: -1}}, false, podstest.SelectorPods()...)
	cases := []struct {
		name string
		req  *podsv1alpha1.PodListRequest
		want []string
	}{
		{"none", &podsv1alpha1.PodListRequest{}, []string{"web-1", "web-2", "dns-0"}},
		{"namespace", &podsv1alpha1.PodListRequest{Namespace: "default"}, []string{"web-1", "web-2"}},
		{"unknown namespace", &podsv1alpha1.PodListRequest{Namespace: "nope"}, nil},
		{"label equality", &podsv1alpha1.PodListRequest{LabelSelector: "tier=dns"}, []string{"dns-0"}},
		{"label set", &podsv1alpha1.PodListRequest{LabelSelector: "tier in (web,cache),app.kubernetes.io/instance!=web-1"}, []string{"web-2"}},
		{"label exists", &podsv1alpha1.PodListRequest{LabelSelector: "!tier"}, nil},
		{"phase", &podsv1alpha1.PodListRequest{FieldSelector: "status.phase=Pending"}, []string{"web-2"}},
		{"name", &podsv1alpha1.PodListRequest{FieldSelector: "metadata.name==dns-0"}, []string{"dns-0"}},
		{"namespace field", &podsv1alpha1.PodListRequest{FieldSelector: "metadata.namespace!=default"}, []string{"dns-0"}},
		{"node and policy", &podsv1alpha1.PodListRequest{FieldSelector: "spec.nodeName=node-1,spec.restartPolicy=Always,spec.schedulerName=default-scheduler"}, []string{"web-1", "web-2", "dns-0"}},
		{"host network", &podsv1alpha1.PodListRequest{FieldSelector: "spec.hostNetwork=true"}, nil},
		{"pod IP", &podsv1alpha1.PodListRequest{FieldSelector: "status.podIP=10.244.0.4"}, []string{"web-2"}},
		{"all three", &podsv1alpha1.PodListRequest{Namespace: "default", LabelSelector: "tier=web", FieldSelector: "status.phase!=Pending"}, []string{"web-1"}},
	}
	for i, kind := range podstest.ClientKinds {
		t.Run(kind.Name, func(t *testing.T) {
			c := podstest.ClientKinds[i].Dial(t, f.Socket)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					resp, err := c.ListReq(t.Context(), tc.req, nil)
					if err != nil {
						t.Fatal(err)
					}
					var got []string
					for _, p := range resp.GetPods() {
						got = append(got, p.GetMetadata().GetName())
					}
					if !slices.Equal(got, tc.want) {
						t.Fatalf("pods %v, want %v", got, tc.want)
					}
					if resp.GetRevision() != f.Revision() {
						t.Fatalf("revision %q, want the store's %q", resp.GetRevision(), f.Revision())
					}
				})
			}
		})
	}
}

// TestListSelectorsMaskAndCache composes selectors with a field mask and
// checks that selected lists are cached per selection, and that a selection
// of no pod encodes none.
func TestListSelectorsMaskAndCache(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := start(t, server.Config{Registry: reg, Limits: server.LimitsConfig{QPS: -1}}, false, podstest.SelectorPods()...)
	c := podstest.ClientKinds[0].Dial(t, f.Socket)
	view := func(name, kind string) float64 {
		return podstest.MetricValue(t, reg, name, map[string]string{"view": kind})
	}
	// The selector sees the whole pod, the mask trims what is returned.
	req := &podsv1alpha1.PodListRequest{LabelSelector: "tier=web", FieldSelector: "status.phase=Running"}
	for range 3 {
		resp, err := c.ListReq(t.Context(), req, podstest.MaskHeader("status.podIP"))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetPods()) != 1 || resp.GetPods()[0].GetStatus().GetPodIP() != "10.244.0.3" || resp.GetPods()[0].GetMetadata() != nil {
			t.Fatalf("pods %v, want web-1 with only its status.podIP", resp.GetPods())
		}
	}
	if computes, hits := view("podsapi_view_computes_total", "list"), view("podsapi_view_cache_hits_total", "list"); computes != 1 || hits != 2 {
		t.Fatalf("3 equal selected lists: %v computes and %v hits, want 1 and 2", computes, hits)
	}
	if computes := view("podsapi_view_computes_total", "mask"); computes != 1 {
		t.Fatalf("%v masked pod views computed, want 1 (the selected pod only)", computes)
	}
	// Another selection is another list; a selection of nothing encodes no
	// pod.
	if _, err := c.ListReq(t.Context(), &podsv1alpha1.PodListRequest{Namespace: "nope"}, podstest.MaskHeader("status.podIP")); err != nil {
		t.Fatal(err)
	}
	if computes := view("podsapi_view_computes_total", "list"); computes != 2 {
		t.Fatalf("%v list computes after a second selection, want 2", computes)
	}
	if computes := view("podsapi_view_computes_total", "mask"); computes != 1 {
		t.Fatalf("%v masked pod views computed after a selection of nothing, want still 1", computes)
	}
}

func TestInvalidSelectors(t *testing.T) {
	f := start(t, server.Config{Limits: server.LimitsConfig{QPS: -1}}, false, podstest.SelectorPods()...)
	cases := []struct {
		name          string
		ns, lab, fld  string
		field, saying string
	}{
		{"label syntax", "", "tier in (web", "", "label_selector", "label_selector"},
		{"label value", "", "tier=no spaces", "", "label_selector", "label_selector"},
		{"unsupported field", "", "", "spec.containers=app", "field_selector", `"spec.containers" is not supported`},
		{"field without operator", "", "", "status.phase", "field_selector", "field_selector"},
		{"long namespace", strings.Repeat("n", 2000), "", "", "namespace", "namespace"},
	}
	for i, kind := range podstest.ClientKinds {
		t.Run(kind.Name, func(t *testing.T) {
			c := podstest.ClientKinds[i].Dial(t, f.Socket)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					_, lerr := c.ListReq(t.Context(), &podsv1alpha1.PodListRequest{Namespace: tc.ns, LabelSelector: tc.lab, FieldSelector: tc.fld}, nil)
					var werr error
					w, err := c.WatchReq(t.Context(), &podsv1alpha1.PodWatchRequest{Namespace: tc.ns, LabelSelector: tc.lab, FieldSelector: tc.fld}, nil)
					if werr = err; err == nil {
						_, werr = w.Recv()
					}
					for what, err := range map[string]error{"list": lerr, "watch": werr} {
						if podstest.ErrorCode(err) != connect.CodeInvalidArgument || podstest.ErrorReason(err) != errinfo.InvalidSelector {
							t.Fatalf("%s: %v, want INVALID_ARGUMENT %s", what, err, errinfo.InvalidSelector)
						}
						if !strings.Contains(podstest.ErrorMessage(err), tc.saying) || podstest.ErrorMetadata(err)["field"] != tc.field {
							t.Fatalf("%s: message %q, metadata %v: want it to name %q and field %q", what, podstest.ErrorMessage(err), podstest.ErrorMetadata(err), tc.saying, tc.field)
						}
					}
				})
			}
			// A revision this server did not write.
			for _, rev := range []string{"garbage", strings.Repeat("r", 100), f.Store.Revision(1 << 40)} {
				w, err := c.WatchReq(t.Context(), &podsv1alpha1.PodWatchRequest{ResumeFrom: rev}, nil)
				if err == nil {
					_, err = w.Recv()
				}
				if podstest.ErrorCode(err) != connect.CodeInvalidArgument || podstest.ErrorReason(err) != errinfo.InvalidRevision {
					t.Fatalf("resume_from %.20q: %v, want INVALID_ARGUMENT %s", rev, err, errinfo.InvalidRevision)
				}
			}
		})
	}
}

// TestWatchResumeTooOld resumes from revisions the server no longer holds:
// out of its history, or from another instance of the server.
func TestWatchResumeTooOld(t *testing.T) {
	for i, kind := range podstest.ClientKinds {
		t.Run(kind.Name, func(t *testing.T) {
			pods := podstest.SelectorPods()
			reg := prometheus.NewRegistry()
			f := startWith(t, server.Config{Registry: reg}, []store.Option{store.WithHistory(2, 1<<20)}, pods...)
			c := podstest.ClientKinds[i].Dial(t, f.Socket)
			var revs []string
			for k := range 4 {
				p := pods[0].DeepCopy()
				p.ResourceVersion = strconv.Itoa(k + 2)
				f.Store.Upsert(p)
				revs = append(revs, f.Revision())
			}
			// A restarted server: a new store with the same pods, hence the
			// same version numbers.
			restarted := startWith(t, server.Config{}, nil, pods...)
			for k := range 4 {
				p := pods[0].DeepCopy()
				p.ResourceVersion = strconv.Itoa(k + 2)
				restarted.Store.Upsert(p)
			}
			rc := podstest.ClientKinds[i].Dial(t, restarted.Socket)
			for _, tc := range []struct {
				name string
				c    podstest.APIClient
				rev  string
			}{
				{"out of the history", c, revs[0]},
				{"another instance", rc, revs[2]},
			} {
				w, err := tc.c.WatchReq(t.Context(), &podsv1alpha1.PodWatchRequest{ResumeFrom: tc.rev}, nil)
				if err == nil {
					_, err = w.Recv()
				}
				if podstest.ErrorCode(err) != connect.CodeOutOfRange || podstest.ErrorReason(err) != errinfo.RevisionTooOld || podstest.ErrorMetadata(err)["revision"] != tc.rev {
					t.Fatalf("%s: %v (metadata %v), want OUT_OF_RANGE %s", tc.name, err, podstest.ErrorMetadata(err), errinfo.RevisionTooOld)
				}
			}
			if got := podstest.GaugeValue(t, reg, "podsapi_watch_history_events"); got != 2 {
				t.Fatalf("podsapi_watch_history_events = %v, want 2", got)
			}
			// The last two changes are still held.
			w, err := c.WatchReq(t.Context(), &podsv1alpha1.PodWatchRequest{ResumeFrom: revs[1]}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"4", "5"} {
				if ev := podstest.Recv(t, w); ev.GetPod().GetMetadata().GetResourceVersion() != want {
					t.Fatalf("replayed %v, want resourceVersion %s", ev, want)
				}
			}
			if ev := podstest.Recv(t, w); ev.GetType() != podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE {
				t.Fatalf("after the replay: %v, want INITIAL_SYNC_COMPLETE", ev)
			}
		})
	}
}

// TestDroppedWatcherResumes drops a stalled watcher and resumes from the
// revision its error carries: the resumed watch continues exactly where the
// dropped one stopped.
func TestDroppedWatcherResumes(t *testing.T) {
	for _, kind := range podstest.ClientKinds {
		t.Run(kind.Name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			pod := podstest.Pod("default", "busy", 1)
			pod.Annotations["padding"] = strings.Repeat("x", 64<<10)
			f := start(t, server.Config{Registry: reg, Watch: server.WatchConfig{Queue: 8}}, false, pod)
			wctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			healthy, err := kind.Dial(t, f.Socket).Watch(wctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			stalled, err := kind.DialSmallWindow(t, f.Socket).Watch(wctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range []podstest.WatchStream{healthy, stalled} {
				podstest.Recv(t, w) // ADDED
				podstest.Recv(t, w) // INITIAL_SYNC_COMPLETE
			}
			const bound = 20000
			k := 1
			for ; k <= bound && podstest.MetricValue(t, reg, "kubelet_pod_watch_events_dropped_total", nil) == 0; k++ {
				p := pod.DeepCopy()
				p.ResourceVersion = strconv.Itoa(k + 1)
				f.Store.Upsert(p)
				podstest.Recv(t, healthy)
			}
			if k > bound {
				t.Fatalf("the stalled watcher was not dropped after %d changes", bound)
			}
			rv, last := 1, ""
			var ferr error
			for {
				ev, err := stalled.Recv()
				if err != nil {
					ferr = err
					break
				}
				rv, _ = strconv.Atoi(ev.GetPod().GetMetadata().GetResourceVersion())
				last = ev.GetRevision()
			}
			rev := podstest.ErrorMetadata(ferr)["revision"]
			if podstest.ErrorReason(ferr) != errinfo.FellBehind || rev == "" {
				t.Fatalf("dropped with %v (metadata %v), want FELL_BEHIND with a revision", ferr, podstest.ErrorMetadata(ferr))
			}
			if last != "" && rev != last {
				t.Fatalf("FELL_BEHIND says revision %q, the last event received was at %q", rev, last)
			}
			// Resume: the changes the dropped watcher lost, in order.
			w, err := kind.Dial(t, f.Socket).WatchReq(wctx, &podsv1alpha1.PodWatchRequest{ResumeFrom: rev}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for {
				ev := podstest.Recv(t, w)
				if ev.GetType() == podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE {
					break
				}
				got, _ := strconv.Atoi(ev.GetPod().GetMetadata().GetResourceVersion())
				if got != rv+1 {
					t.Fatalf("resumed watcher got version %d after %d", got, rv)
				}
				rv = got
			}
			if rv != k {
				t.Fatalf("resumed watcher ends at version %d, the store at %d", rv, k)
			}
		})
	}
}
