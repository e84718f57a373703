package service_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1/podsv1alpha1connect"
	"github.com/podsapi/podsapi/service"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestEnvelopesAreConnects pins the rules of envelope.go together: for each
// protocol of binary protobuf streams, a client that accepts gzip (as
// connect-go's do) receives from a watch whose snapshot is written raw,
// shared, exactly the bytes connect sends for the same watch one event at a
// time: the same envelopes, every flags byte 0 (not compressed). Were
// connect's envelopes to change, or the handlers to compress, the raw
// envelopes would differ from connect's.
func TestEnvelopesAreConnects(t *testing.T) {
	st := store.New()
	for i := range 300 {
		p := podstest.Pod("default", fmt.Sprintf("pod-%03d", i), i)
		// Compressible: gzip would shrink every message.
		p.Annotations = map[string]string{"example.com/padding": strings.Repeat("x", 1<<10)}
		st.Upsert(p)
	}
	st.MarkSynced()
	reg := prometheus.NewRegistry()
	raw := newHarness(t, st, true, service.WithMetrics(service.NewMetrics(reg)))
	plain := newHarness(t, st, false)
	for _, contentType := range []string{"application/grpc", "application/grpc+proto", "application/grpc-web+proto", "application/connect+proto"} {
		t.Run(contentType, func(t *testing.T) {
			before := snapshotComputes(t, reg)
			want := watchEnvelopes(t, plain, contentType)
			got := watchEnvelopes(t, raw, contentType)
			if snapshotComputes(t, reg) != before+1 {
				t.Fatal("the watch with a Stream did not write a shared snapshot")
			}
			for i := range want {
				if want[i][0] != 0 {
					t.Fatalf("connect's message %d has flags %#x: the handlers compress", i, want[i][0])
				}
			}
			if len(want) != 301 {
				t.Fatalf("%d messages from connect, want 300 ADDED, then INITIAL_SYNC_COMPLETE", len(want))
			}
			if len(got) != len(want) {
				t.Fatalf("%d messages written raw, %d by connect", len(got), len(want))
			}
			for i := range want {
				if want[i][0] != 0 {
					t.Fatalf("connect's message %d has flags %#x: the handlers compress", i, want[i][0])
				}
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("message %d written raw differs from connect's:\n got %x\nwant %x", i, got[i][:min(len(got[i]), 32)], want[i][:min(len(want[i]), 32)])
				}
			}
		})
	}
}

// watchEnvelopes watches the typed wire of h with contentType, accepting
// gzip, and returns the enveloped messages up to INITIAL_SYNC_COMPLETE.
func watchEnvelopes(t *testing.T, h *harness, contentType string) [][]byte {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	p := podstest.Protocol{Name: contentType, ContentType: contentType}
	resp, err := podstest.OpenWatch(ctx, h.http, baseURL+podsv1alpha1connect.PodsWatchPodsProcedure, &podsv1alpha1.PodWatchRequest{}, "", p)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var msgs [][]byte
	for {
		msg, err := podstest.ReadEnvelope(resp.Body)
		if err != nil {
			t.Fatalf("after %d messages: %v", len(msgs), err)
		}
		msgs = append(msgs, msg)
		if msg[0] != 0 {
			return msgs // compressed, or the end of the stream: the caller tells
		}
		ev := &podsv1alpha1.PodWatchResponse{}
		if p.Unmarshal(msg, ev) == nil && ev.GetType() == podsv1alpha1.EventType_EVENT_TYPE_INITIAL_SYNC_COMPLETE {
			return msgs
		}
	}
}

// snapshotView selects the metrics of the shared snapshots' view.
var snapshotView = map[string]string{"view": "snapshot"}

// snapshotComputes returns how many shared snapshots were built.
func snapshotComputes(t *testing.T, reg prometheus.Gatherer) float64 {
	t.Helper()
	return podstest.MetricValue(t, reg, "podsapi_view_computes_total", snapshotView)
}
