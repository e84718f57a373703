package client_test

import (
	"net/netip"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/client"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
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

// TestListGetWatchWorkloads reads the workload of each pod listed, got and
// watched from a server that resolves workloads, selects pods by their
// workload on the typed wire, and refuses to select by workload on the
// kubelet's, which has none.
func TestListGetWatchWorkloads(t *testing.T) {
	yes := true
	web := podstest.Pod("default", "web-7d9f8b6c5d-x2k4q", 1) // its ReplicaSet web-7d9f8b6c5d
	web.Labels["pod-template-hash"] = "7d9f8b6c5d"
	db := podstest.Pod("default", "db-0", 2)
	db.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "sts", Controller: &yes}}
	r := workload.NewResolver()
	st := store.New()
	sink := r.Sink(st)
	sink.Upsert(web)
	sink.Upsert(db)
	sink.MarkSynced()
	srv := podstest.Start(t, st, server.Config{Workloads: r})
	c := dial(t, srv.SocketPath())
	ofWeb := &podsv1alpha1.PodWorkload{Kind: "Deployment", Name: "web", Resolution: podsv1alpha1.WorkloadResolution_WORKLOAD_RESOLUTION_DERIVED}
	ofDB := &podsv1alpha1.PodWorkload{Kind: "StatefulSet", Name: "db", Resolution: podsv1alpha1.WorkloadResolution_WORKLOAD_RESOLUTION_RESOLVED}

	t.Run("ListWorkloads", func(t *testing.T) {
		pods, ws, err := c.ListWorkloads(t.Context(), client.WithFields("status.phase"))
		if err != nil {
			t.Fatal(err)
		}
		if len(pods) != 2 || len(ws) != 2 || !proto.Equal(ws[web.UID], ofWeb) || !proto.Equal(ws[db.UID], ofDB) {
			t.Errorf("%d pods, workloads %v: want 2, %v and %v", len(pods), ws, ofWeb, ofDB)
		}
	})
	t.Run("List by workload", func(t *testing.T) {
		pods, err := c.List(t.Context(), client.WithWorkloadSelector("StatefulSet", ""))
		if err != nil {
			t.Fatal(err)
		}
		if len(pods) != 1 || pods[0].Name != db.Name {
			t.Errorf("pods %v, want %s alone", pods, db.Name)
		}
	})
	t.Run("GetWorkload", func(t *testing.T) {
		pod, w, err := c.GetWorkload(t.Context(), web.UID)
		if err != nil {
			t.Fatal(err)
		}
		if pod.Name != web.Name || !proto.Equal(w, ofWeb) {
			t.Errorf("pod %s with workload %v, want %s with %v", pod.Name, w, web.Name, ofWeb)
		}
	})
	t.Run("Watch", func(t *testing.T) {
		w, err := c.Watch(t.Context(), client.WithWorkloads(), client.WithWorkloadSelector("Deployment", "web"))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		ev, err := w.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type != client.Added || ev.Pod.Name != web.Name || !proto.Equal(ev.Workload, ofWeb) {
			t.Errorf("event %v %s with workload %v, want Added %s with %v", ev.Type, ev.Pod.Name, ev.Workload, web.Name, ofWeb)
		}
		if ev, err := w.Next(); err != nil || ev.Type != client.Synced {
			t.Errorf("event %v (%v), want Synced", ev.Type, err)
		}
	})
	t.Run("kubelet wire", func(t *testing.T) {
		kc, err := client.New(srv.SocketPath(), client.WithWire(client.WireKubelet))
		if err != nil {
			t.Fatal(err)
		}
		defer kc.Close()
		if _, err := kc.List(t.Context(), client.WithWorkloadSelector("Deployment", "web")); err == nil || !strings.Contains(err.Error(), "typed wire") {
			t.Errorf("List by workload on the kubelet's wire: %v, want an error naming the typed wire", err)
		}
		if _, err := kc.Watch(t.Context(), client.WithWorkloadSelector("Deployment", "web")); err == nil {
			t.Error("Watch by workload on the kubelet's wire: no error")
		}
		_, ws, err := kc.ListWorkloads(t.Context())
		if err != nil || len(ws) != 0 {
			t.Errorf("ListWorkloads on the kubelet's wire: %v, %v; want no workloads", ws, err)
		}
	})
}
