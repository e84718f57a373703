package main

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
	"github.com/podsapi/podsapi/workload"
)

// workloadServer starts a server that resolves workloads (derived from
// names), of two pods: web, of the Deployment web, and cache, of the
// StatefulSet cache.
func workloadServer(t *testing.T) (srv *server.Server, web, cache *corev1.Pod) {
	t.Helper()
	yes := true
	web = podstest.Pod("default", "web-7d9f8b6c5d-x2k4q", 1)
	web.Labels["pod-template-hash"] = "7d9f8b6c5d"
	cache = podstest.Pod("default", "cache-0", 2)
	cache.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "cache", UID: "sts", Controller: &yes}}
	r := workload.NewResolver()
	st := store.New()
	sink := r.Sink(st)
	sink.Upsert(web)
	sink.Upsert(cache)
	sink.MarkSynced()
	return podstest.Start(t, st, server.Config{Workloads: r}), web, cache
}

// TestFindWorkload prints the WORKLOAD column of find, and its annotation
// in find's objects, from a server that resolves workloads.
func TestFindWorkload(t *testing.T) {
	srv, web, cache := workloadServer(t)
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

// TestListGetWorkload prints the WORKLOAD column of list, get and find in
// -o wide, once, and lists the pods of one workload with --workload.
func TestListGetWorkload(t *testing.T) {
	srv, web, _ := workloadServer(t)
	for _, tc := range []struct {
		name      string
		args      []string
		want      []string
		wantNot   []string
		workloads int // the WORKLOAD headers printed
	}{
		{name: "list wide", args: []string{"list", "-o", "wide"}, want: []string{"Deployment/web (derived)", "StatefulSet/cache"}, workloads: 1},
		{name: "list by workload", args: []string{"list", "--workload", "StatefulSet/cache"}, want: []string{"cache-0"}, wantNot: []string{"web-"}},
		{name: "list by kind, wide", args: []string{"list", "--workload", "Deployment", "-o", "wide"}, want: []string{"Deployment/web (derived)"}, wantNot: []string{"cache-0"}, workloads: 1},
		{name: "get wide", args: []string{"get", "default/cache-0", "-o", "wide"}, want: []string{"StatefulSet/cache"}, workloads: 1},
		{name: "find wide", args: []string{"find", "--ip", web.Status.PodIP, "-o", "wide"}, want: []string{"Deployment/web (derived)"}, workloads: 1},
		{name: "list without wide", args: []string{"list"}, wantNot: []string{"Deployment/web"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := run(t, append([]string{"--socket", srv.SocketPath()}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for _, s := range tc.want {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout\n%s\nwant it to hold %q", stdout, s)
				}
			}
			for _, s := range tc.wantNot {
				if strings.Contains(stdout, s) {
					t.Errorf("stdout\n%s\nwant it without %q", stdout, s)
				}
			}
			if n := strings.Count(stdout, "WORKLOAD"); n != tc.workloads {
				t.Errorf("stdout\n%s\nhas %d WORKLOAD columns, want %d", stdout, n, tc.workloads)
			}
		})
	}
	t.Run("bad --workload", func(t *testing.T) {
		_, stderr, code := run(t, "--socket", srv.SocketPath(), "list", "--workload", "/web")
		if code == 0 || !strings.Contains(stderr, "KIND/NAME") {
			t.Errorf("exit %d, stderr %q: want a usage error naming KIND/NAME", code, stderr)
		}
	})
}
