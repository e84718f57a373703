package service_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/podsapi/podsapi/budget"
	"github.com/podsapi/podsapi/errinfo"
	"github.com/podsapi/podsapi/fieldmask"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestResumeEqualsLiveWatch checks that a watch resumed far back, whose
// replay goes out as shared enveloped blocks of the history, gets exactly the
// events a watch with the same selector and field mask got live: the pods
// that start or stop matching ADDED and DELETED, the changes the mask hides
// left out, one revision each.
func TestResumeEqualsLiveWatch(t *testing.T) {
	const changes = 700 // more than five blocks of the history
	for i, kind := range podstest.ClientKinds {
		t.Run(kind.Name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			f := startWith(t, server.Config{Registry: reg}, []store.Option{store.WithHistory(4000, 1<<30)})
			c := podstest.ClientKinds[i].Dial(t, f.Socket)
			h := http.Header{}
			h.Set(fieldmask.Header, "metadata.labels,status.phase")
			req := &podsv1alpha1.PodWatchRequest{LabelSelector: "tier=web"}
			start := f.Revision()
			live, err := c.WatchReq(t.Context(), req, h)
			if err != nil {
				t.Fatal(err)
			}
			if ev := podstest.Recv(t, live); ev.GetType() != podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE {
				t.Fatalf("live watch: %v, want the sync marker of an empty store", ev.GetType())
			}
			for k := range changes {
				p := podstest.Pod("ns", fmt.Sprintf("p%d", k%17), k%17)
				p.Labels = map[string]string{"tier": []string{"web", "db"}[(k/17)%2]}
				p.Annotations = map[string]string{"n": strconv.Itoa(k)} // hidden by the mask
				if k%5 == 0 {
					p.Status.Phase = "Running"
				}
				if k%41 == 40 {
					f.Store.Delete(p.UID)
					continue
				}
				f.Store.Upsert(p)
			}
			// The last change is one the watches see.
			last := podstest.Pod("ns", "last", 99)
			last.Labels = map[string]string{"tier": "web"}
			f.Store.Upsert(last)
			end := f.Revision()
			var want []*podsv1alpha1.PodWatchResponse
			for len(want) == 0 || want[len(want)-1].GetRevision() != end {
				want = append(want, podstest.Recv(t, live))
			}
			req.ResumeFrom = start
			resumed, err := c.WatchReq(t.Context(), req, h)
			if err != nil {
				t.Fatal(err)
			}
			for n := 0; ; n++ {
				ev := podstest.Recv(t, resumed)
				if ev.GetType() == podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE {
					if n != len(want) {
						t.Fatalf("resumed watch synced after %d events, want %d", n, len(want))
					}
					break
				}
				if n >= len(want) || !proto.Equal(ev, want[n]) {
					t.Fatalf("resumed event %d: %v\nwant %v", n, ev, want[n])
				}
			}
			if blocks := podstest.MetricValue(t, reg, "podsapi_view_computes_total", map[string]string{"view": "replay"}); blocks < 4 {
				t.Fatalf("%v blocks of the history enveloped, want the replay sent from at least 4", blocks)
			}
		})
	}
}

// TestResumeOverShare checks that a resume whose shared replay would take
// more than its client's fair share of the memory budget ends
// RESOURCE_EXHAUSTED MEMORY_BUDGET_EXCEEDED, saying where to resume from,
// after every change up to there, and that the server keeps serving.
func TestResumeOverShare(t *testing.T) {
	for i, kind := range podstest.ClientKinds {
		t.Run(kind.Name, func(t *testing.T) {
			// A share of 64 KiB; a block of 128 changes of 3 KB is 384 KB.
			f := startWith(t, server.Config{}, []store.Option{store.WithHistory(4000, 1<<30), store.WithBudget(budget.New(256 << 10))})
			start := f.Revision()
			for k := range 400 {
				p := podstest.Pod("ns", fmt.Sprintf("p%d", k%7), k%7)
				p.Annotations = map[string]string{"pad": strings.Repeat("x", 3000), "n": strconv.Itoa(k)}
				f.Store.Upsert(p)
			}
			c := podstest.ClientKinds[i].Dial(t, f.Socket)
			w, err := c.WatchReq(t.Context(), &podsv1alpha1.PodWatchRequest{ResumeFrom: start}, nil)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for {
				ev, err := w.Recv()
				if err != nil {
					if podstest.ErrorCode(err) != connect.CodeResourceExhausted || podstest.ErrorReason(err) != errinfo.MemoryBudget {
						t.Fatalf("after %d events: %v, want RESOURCE_EXHAUSTED %s", n, err, errinfo.MemoryBudget)
					}
					if rev := podstest.ErrorMetadata(err)["revision"]; n == 0 || rev != ev2rev(f, start, n) {
						t.Fatalf("after %d events: resume from %q, want the revision of the last event", n, rev)
					}
					break
				}
				if ev.GetType() == podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE {
					t.Fatalf("synced after %d events: the replay was not refused", n)
				}
				n++
			}
			if _, err := c.ListReq(t.Context(), &podsv1alpha1.PodListRequest{}, nil); err != nil {
				t.Fatalf("ListPods after the refusal: %v", err)
			}
		})
	}
}

// ev2rev returns the revision of the n-th change after the revision start
// of f's store.
func ev2rev(f *podstest.Fixture, start string, n int) string {
	_, v, _ := strings.Cut(start, ".")
	from, _ := strconv.ParseUint(v, 10, 64)
	return f.Store.Revision(from + uint64(n))
}
