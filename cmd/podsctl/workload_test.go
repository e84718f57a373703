package main

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/internal/rigs/podstest"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/workload"
)

// TestFindWorkload prints the WORKLOAD column of find, and its annotation
// in find's objects, from a server that resolves workloads.
func TestFindWorkload(t *testing.T) {
	yes := true
	web := podstest.Pod("default", "web-7d9f8b6c5d-x2k4q", 1)
	web.Labels["pod-template-hash"] = "7d9f8b6c5d"
	cache := podstest.Pod("default", "cache-0", 2)
	cache.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "cache", UID: "sts", Controller: &yes}}
	r := workload.NewResolver()
	st := store.New()
	sink := r.Sink(st)
	sink.Upsert(web)
	sink.Upsert(cache)
	sink.MarkSynced()
	srv := podstest.Start(t, st, server.Config{Workloads: r})
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"derived", []string{"--ip", web.Status.PodIP},
			"NAMESPACE   NAME                   CONTAINER   WORKLOAD                   READY   STATUS    RESTARTS   AGE\n" +
				"default     web-7d9f8b6c5d-x2k4q   <none>      Deployment/web (derived)   2/2     Running   1          3d4h\n"},
		{"resolved", []string{"--ip", cache.Status.PodIP},
			"NAMESPACE   NAME      CONTAINER   WORKLOAD            READY   STATUS    RESTARTS   AGE\n" +
				"default     cache-0   <none>      StatefulSet/cache   2/2     Running   1          3d4h\n"},
		{"yaml", []string{"--ip", cache.Status.PodIP, "-o", "yaml"}, "podsapi.io/find-workload: StatefulSet/cache\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := run(t, append([]string{"--socket", srv.SocketPath(), "find"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if tc.name == "yaml" {
				if !strings.Contains(stdout, tc.want) {
					t.Errorf("stdout %s, want it to hold %q", stdout, tc.want)
				}
				return
			}
			if stdout != tc.want {
				t.Errorf("stdout\n%s, want\n%s", stdout, tc.want)
			}
		})
	}
}
