package service_test

import (
	"fmt"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/service"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestSnapshotFellBehind drops a watcher whose client stopped reading in the
// middle of its snapshot: the watch checks between the chunks it writes, and
// ends before INITIAL_SYNC_COMPLETE with FELL_BEHIND in each protocol's way,
// after whole messages only. It waits for events alone: the first event
// (the watch has its snapshot), then the end of the stream.
func TestSnapshotFellBehind(t *testing.T) {
	const pods = 400 // about 1.2 MB of events: many chunks
	var initial []*corev1.Pod
	for i := range pods {
		initial = append(initial, podstest.Pod("default", fmt.Sprintf("pod-%03d", i), i))
	}
	for _, p := range podstest.Protocols {
		t.Run(p.Name, func(t *testing.T) {
			h := newHarness(t, synced(nil, initial...), true, service.WithWatchQueue(1))
			// The client's flow-control windows hold 64 KiB: the service
			// cannot write a whole chunk while the client does not read.
			hc := h.client(t, &http.HTTP2Config{MaxReceiveBufferPerStream: 64 << 10, MaxReceiveBufferPerConnection: 64 << 10})
			resp, err := podstest.OpenWatch(t.Context(), hc, baseURL+podsv1alpha1connect.PodsWatchPodsProcedure, &podsv1alpha1.PodWatchRequest{}, "", p)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			// The first event says the watch has its snapshot; two changes
			// then overflow its queue of one.
			if _, err := podstest.ReadEnvelope(resp.Body); err != nil {
				t.Fatal(err)
			}
			h.store.Upsert(podstest.Pod("default", "new-1", 1000))
			h.store.Upsert(podstest.Pod("default", "new-2", 1001))
			msgs, err := podstest.ExpectEnd(resp, p, 8, "resource_exhausted")
			if err != nil {
				t.Fatalf("after %d more messages: %v", len(msgs), err)
			}
			if len(msgs)+1 >= pods {
				t.Fatalf("%d events before FELL_BEHIND, want it within the snapshot of %d", len(msgs)+1, pods)
			}
			for i, msg := range msgs {
				ev := &podsv1alpha1.PodWatchResponse{}
				if err := p.Unmarshal(msg, ev); err != nil || ev.GetType() != podsv1alpha1.EventType_EVENT_TYPE_ADDED {
					t.Fatalf("message %d: %v, %v; want an ADDED event", i, ev.GetType(), err)
				}
			}
		})
	}
}
