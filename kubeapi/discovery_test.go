package kubeapi_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"

	"github.com/podsapi/podsapi/kubeapi"
	"github.com/podsapi/podsapi/test/podstest"
)

// TestDiscovery reads the local discovery with client-go's discovery
// client, which asks for aggregated discovery first and falls back to the
// documents: the core group's v1 with pods alone, and /version.
func TestDiscovery(t *testing.T) {
	s := serve(t, handler(newStore(), kubeapi.WithDiscovery(), kubeapi.WithVersion("v1.37.2")))
	dc, err := discovery.NewDiscoveryClientForConfig(s.config(""))
	if err != nil {
		t.Fatal(err)
	}
	groups, resources, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 1 || groups[0].Name != "" || groups[0].PreferredVersion.Version != "v1" {
		t.Fatalf("groups %+v", groups)
	}
	if len(resources) != 1 || len(resources[0].APIResources) != 1 {
		t.Fatalf("resources %+v", resources)
	}
	r := resources[0].APIResources[0]
	if r.Name != "pods" || r.Kind != "Pod" || !r.Namespaced || len(r.Verbs) != 3 {
		t.Fatalf("pods %+v", r)
	}
	v, err := dc.ServerVersion()
	if err != nil || v.GitVersion != "v1.37.2" || v.Major != "1" || v.Minor != "37" {
		t.Fatalf("version %+v %v", v, err)
	}
}

// TestKubeletPods polls the kubelet's /pods: the node's pods as their
// source gave them (their own resourceVersions and UIDs), each poll after
// a change seeing it.
func TestKubeletPods(t *testing.T) {
	st := newStore(pod("default", "web-1", 1))
	s := serve(t, handler(st))
	poll := func() corev1.PodList {
		resp, body := s.get(t, "/pods", "")
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		var l corev1.PodList
		if err := json.Unmarshal(body, &l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := poll()
	if len(l.Items) != 1 || l.Kind != "PodList" || l.Items[0].ResourceVersion != "1" || l.Items[0].UID != podstest.UID("default", "web-1") {
		t.Fatalf("/pods %+v", l)
	}
	st.Upsert(pod("default", "web-2", 2))
	if l := poll(); len(l.Items) != 2 {
		t.Fatalf("/pods after a change: %d pods", len(l.Items))
	}
	st.Delete(podstest.UID("default", "web-1"))
	st.Delete(podstest.UID("default", "web-2"))
	if _, body := s.get(t, "/pods", ""); string(body) != `{"kind":"PodList","apiVersion":"v1","metadata":{},"items":null}`+"\n" {
		t.Fatalf("/pods of no pod: %s", body)
	}
}

// TestBookmarks watches with bookmarks allowed: after the initial events
// and their closing bookmark, bookmarks come at the revision of the last
// change the watch accounted for, a change it did not select included.
func TestBookmarks(t *testing.T) {
	st := newStore(pod("default", "web-1", 1))
	cs := serve(t, handler(st, kubeapi.WithBookmarkInterval(time.Millisecond))).clientset(t, "")
	w, err := cs.CoreV1().Pods("default").Watch(context.Background(), metav1.ListOptions{
		FieldSelector: pinned, AllowWatchBookmarks: true, SendInitialEvents: new(true),
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if ev := next(t, w); ev.Type != watch.Added {
		t.Fatalf("first event %s", ev.Type)
	}
	ev := next(t, w)
	p := ev.Object.(*corev1.Pod)
	if ev.Type != watch.Bookmark || p.Annotations[metav1.InitialEventsAnnotationKey] != "true" || p.ResourceVersion != st.Revision(1) {
		t.Fatalf("got %s %+v, want the bookmark ending the initial events", ev.Type, p.ObjectMeta)
	}
	st.Upsert(pod("kube-system", "dns-1", 2)) // not selected: another namespace
	for {
		ev := next(t, w)
		if ev.Type != watch.Bookmark {
			t.Fatalf("got %s, want only bookmarks", ev.Type)
		}
		p := ev.Object.(*corev1.Pod)
		if p.Annotations[metav1.InitialEventsAnnotationKey] != "" {
			t.Fatalf("a second end of initial events")
		}
		if p.ResourceVersion == st.Revision(2) {
			return
		}
	}
}
