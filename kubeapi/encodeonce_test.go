package kubeapi_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// TestEncodedOnce runs ten watches in each encoding and sees that a change
// reaching all twenty costs one encoding of the object and one of the event
// per encoding, not one per watch; and that lists and polls of the kubelet's
// /pods reuse the encodings of the pods.
func TestEncodedOnce(t *testing.T) {
	st := newStore(pod("default", "web-1", 1), pod("default", "web-2", 2))
	h := handler(st)
	s := serve(t, h)
	var watches []watch.Interface
	for _, ct := range contentTypes {
		cs := s.clientset(t, ct.contentType)
		for range 10 {
			w, err := cs.CoreV1().Pods("").Watch(context.Background(), metav1.ListOptions{FieldSelector: pinned, ResourceVersion: st.Revision(2)})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			watches = append(watches, w)
		}
	}
	before := h.Encodes()
	st.Upsert(pod("default", "web-3", 3))
	for _, w := range watches {
		if ev := next(t, w); ev.Type != watch.Added {
			t.Fatalf("got %s", ev.Type)
		}
	}
	if n := h.Encodes() - before; n != 4 {
		t.Errorf("a change to 20 watches cost %d encodings, want 4 (object and event, in each encoding)", n)
	}

	before = h.Encodes()
	for range 5 {
		for _, ct := range contentTypes {
			if _, err := s.clientset(t, ct.contentType).CoreV1().Pods("").List(context.Background(), metav1.ListOptions{FieldSelector: pinned}); err != nil {
				t.Fatal(err)
			}
		}
		s.get(t, "/pods", "")
	}
	if n := h.Encodes() - before; n != 9 {
		t.Errorf("5 lists in each encoding and 5 polls of /pods of 3 pods cost %d encodings, want 9 (3 pods, 3 uses)", n)
	}
}
