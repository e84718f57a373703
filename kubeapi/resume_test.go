package kubeapi_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/podsapi/podsapi/test/podstest"
)

// next returns the next event of w, failing the test near its deadline.
func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	deadline, stop := podstest.NearDeadline(t)
	defer stop()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("the watch ended")
		}
		return ev
	case <-deadline:
		t.Fatal("no watch event")
	}
	return watch.Event{}
}

// TestWatchResumes watches with a typed clientset from the resourceVersion
// of a list, after changes: it gets exactly the changes after the list, each
// object with the resourceVersion of its change (a deletion's own), then the
// live changes.
func TestWatchResumes(t *testing.T) {
	for _, ct := range contentTypes {
		t.Run(ct.name, func(t *testing.T) {
			st := newStore(pod("default", "web-1", 1), pod("kube-system", "dns-1", 2))
			cs := serve(t, handler(st)).clientset(t, ct.contentType)
			ctx := context.Background()
			list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: pinned})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(list.Items); n != 2 {
				t.Fatalf("listed %d pods, want 2", n)
			}
			changed := pod("default", "web-1", 1)
			changed.Status.Phase = corev1.PodSucceeded
			st.Upsert(changed)
			st.Upsert(pod("default", "web-2", 3))
			st.Delete(podstest.UID("kube-system", "dns-1"))
			w, err := cs.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{FieldSelector: pinned, ResourceVersion: list.ResourceVersion})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			v, _ := st.List()
			want := []struct {
				typ  watch.EventType
				name string
				rv   string
			}{
				{watch.Modified, "web-1", st.Revision(v - 2)},
				{watch.Added, "web-2", st.Revision(v - 1)},
				{watch.Deleted, "dns-1", st.Revision(v)},
			}
			for _, w1 := range want {
				ev := next(t, w)
				p, ok := ev.Object.(*corev1.Pod)
				if !ok || ev.Type != w1.typ || p.Name != w1.name || p.ResourceVersion != w1.rv {
					t.Fatalf("got %s %T %+v, want %s %s at %s", ev.Type, ev.Object, ev.Object, w1.typ, w1.name, w1.rv)
				}
			}
			// A pod that stops matching a selector leaves the watch as
			// DELETED, with its last matching state.
			w2, err := cs.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: pinned + ",status.phase=Running", ResourceVersion: st.Revision(v)})
			if err != nil {
				t.Fatal(err)
			}
			defer w2.Stop()
			done := pod("default", "web-2", 3)
			done.Status.Phase = corev1.PodFailed
			st.Upsert(done)
			if ev := next(t, w); ev.Type != watch.Modified || ev.Object.(*corev1.Pod).Status.Phase != corev1.PodFailed {
				t.Fatalf("live change: got %s %+v", ev.Type, ev.Object)
			}
			ev := next(t, w2)
			if p := ev.Object.(*corev1.Pod); ev.Type != watch.Deleted || p.Name != "web-2" || p.Status.Phase != corev1.PodRunning || p.ResourceVersion != st.Revision(v+1) {
				t.Fatalf("moved out: got %s %s %s at %s", ev.Type, p.Name, p.Status.Phase, p.ResourceVersion)
			}
		})
	}
}

// TestWatchExpired watches from resourceVersions podsapi cannot resume
// from: another podsapi's (before a restart) and the API server's. The
// watch answers one ERROR event with the API server's 410 Expired, which
// client-go takes as a reason to list again.
func TestWatchExpired(t *testing.T) {
	other := newStore()
	other.Upsert(pod("default", "web-1", 1))
	otherRV := other.Revision(1)
	for _, ct := range contentTypes {
		for _, rv := range []string{otherRV, "12345"} {
			t.Run(ct.name+"/"+rv, func(t *testing.T) {
				st := newStore(pod("default", "web-1", 1))
				cs := serve(t, handler(st)).clientset(t, ct.contentType)
				w, err := cs.CoreV1().Pods("").Watch(context.Background(), metav1.ListOptions{FieldSelector: pinned, ResourceVersion: rv})
				if err != nil {
					t.Fatal(err)
				}
				defer w.Stop()
				ev := next(t, w)
				status, ok := ev.Object.(*metav1.Status)
				if ev.Type != watch.Error || !ok {
					t.Fatalf("got %s %T, want an ERROR Status", ev.Type, ev.Object)
				}
				if err := apierrors.FromObject(status); !apierrors.IsResourceExpired(err) || status.Code != 410 {
					t.Fatalf("got %+v, want 410 Expired", status)
				}
			})
		}
	}
}

// TestInformerAcrossRestart runs an informer across a cut connection (it
// resumes from its last resourceVersion, with no new list) and across a
// restart of podsapi (a new store, whose revisions are new: the informer's
// resume gets 410 Expired, it lists again and its cache equals the new
// store's pods). Each watch gets an event before it is cut: client-go lists
// again after a watch that ends within a second with no event, whatever the
// server.
func TestInformerAcrossRestart(t *testing.T) {
	for _, ct := range contentTypes {
		t.Run(ct.name, func(t *testing.T) {
			st := newStore(pod("default", "web-1", 1), pod("kube-system", "dns-1", 2))
			s := serve(t, handler(st))
			rec := make(recorder, 100)
			idx := startInformer(t, s.clientset(t, ct.contentType), rec)
			rec.expect(t, "ADDED default/web-1", "ADDED kube-system/dns-1")
			st.Upsert(pod("default", "web-2", 3))
			rec.expect(t, "ADDED default/web-2")

			s.srv.CloseClientConnections()
			st.Upsert(pod("default", "web-3", 4))
			rec.expect(t, "ADDED default/web-3")
			converge(t, idx, st, rec)
			if n := streamingLists(s); n != 1 {
				t.Errorf("%d streaming lists after a cut connection, want 1 (a resume)", n)
			}

			restarted := pod("default", "web-1", 1)
			restarted.Labels["restarted"] = "true"
			st2 := newStore(restarted, pod("default", "web-9", 9))
			s.swap.set(handler(st2))
			s.srv.CloseClientConnections()
			rec.expect(t, "MODIFIED default/web-1", "DELETED default/web-2", "DELETED default/web-3", "DELETED kube-system/dns-1", "ADDED default/web-9")
			converge(t, idx, st2, rec)
			if n := streamingLists(s); n != 2 {
				t.Errorf("%d streaming lists after a restart, want 2 (a list again)", n)
			}
			var expired bool
			for _, x := range s.swap.exchanges() {
				q, _ := url.ParseQuery(x.query[strings.Index(x.query, "?")+1:])
				if rv := q.Get("resourceVersion"); q.Get("sendInitialEvents") == "" && strings.HasPrefix(rv, st.Revision(0)[:8]) {
					expired = true // a resume, answered 410 by st2 or resumed by st
				}
			}
			if !expired {
				t.Errorf("no watch resumed from a revision: %+v", s.swap.exchanges())
			}
		})
	}
}

// streamingLists counts the streaming lists the server answered.
func streamingLists(s *served) int {
	n := 0
	for _, x := range s.swap.exchanges() {
		q, _ := url.ParseQuery(x.query[strings.Index(x.query, "?")+1:])
		if q.Get("sendInitialEvents") == "true" {
			n++
		}
	}
	return n
}
