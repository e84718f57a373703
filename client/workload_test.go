package client_test

import (
	"net/netip"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/podsapi/podsapi/client"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/internal/rigs/podstest"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/workload"
)

// TestFindPodsWorkload reads each match's workload, whatever WithFields,
// from a server that resolves workloads, and none from one that does not.
func TestFindPodsWorkload(t *testing.T) {
	web := podstest.Pod("default", "web-7d9f8b6c5d-x2k4q", 1) // its ReplicaSet web-7d9f8b6c5d
	web.Labels["pod-template-hash"] = "7d9f8b6c5d"
	r := workload.NewResolver()
	st := store.New()
	sink := r.Sink(st)
	sink.Upsert(web)
	sink.MarkSynced()
	for _, tc := range []struct {
		name string
		cfg  server.Config
		want *podsv1alpha1.PodWorkload
	}{
		{"resolved", server.Config{Workloads: r}, &podsv1alpha1.PodWorkload{Kind: "Deployment", Name: "web", Resolution: podsv1alpha1.WorkloadResolution_WORKLOAD_RESOLUTION_DERIVED}},
		{"none", server.Config{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startClient(t, st, tc.cfg)
			ms, _, err := c.FindPods(t.Context(), client.ByIP(netip.MustParseAddr(web.Status.PodIP)), client.WithFields("status.phase"))
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) != 1 || !proto.Equal(ms[0].Workload, tc.want) {
				t.Fatalf("matches %v, want one with workload %v", ms, tc.want)
			}
			if ms[0].Pod.Spec.Containers != nil {
				t.Errorf("the pod is not trimmed by WithFields: %v", ms[0].Pod.Spec)
			}
		})
	}
}
