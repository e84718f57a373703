package kindstore_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/podsapi/podsapi/kindstore"
	"github.com/podsapi/podsapi/store"
)

func namespace(name, rv, team string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: name, UID: types.UID("uid-" + name), ResourceVersion: rv, Labels: map[string]string{"team": team},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
}

// TestFeed feeds a store as an informer does and checks its versions: the
// API server's resourceVersion and managed fields are not kept (a relist
// that changes only them is no change), the informer's object is not
// changed, a delete of a tombstone removes the object, and selectors see
// the kind's fields.
func TestFeed(t *testing.T) {
	s := kindstore.NewNamespaces()
	a := namespace("a", "10", "x")
	s.OnAdd(a, true)
	s.OnAdd(namespace("b", "11", "y"), true)
	s.MarkSynced()
	if a.ResourceVersion != "10" || len(a.ManagedFields) != 1 {
		t.Fatalf("the informer's object was changed: %+v", a.ObjectMeta)
	}
	_, w := s.Watch(16, nil)
	defer w.Stop()
	s.OnUpdate(a, namespace("a", "12", "x")) // only the resourceVersion: no change
	s.OnUpdate(a, namespace("a", "13", "z"))
	s.OnDelete(cache.DeletedFinalStateUnknown{Key: "b", Obj: namespace("b", "11", "y")})
	<-w.Ready()
	evs := w.Take(nil)
	if len(evs) != 2 || evs[0].Type != store.Modified || evs[0].Version != 3 || evs[1].Type != store.Deleted || evs[1].Pod.Name != "b" {
		t.Fatalf("events %+v, want MODIFIED a at 3 and DELETED b", evs)
	}
	got := &corev1.Namespace{}
	if err := got.Unmarshal(evs[0].Pod.Raw()); err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != "" || got.ManagedFields != nil || got.Labels["team"] != "z" {
		t.Errorf("stored %+v, want no resourceVersion, no managed fields, team=z", got.ObjectMeta)
	}
	if got, ok, err := s.Get("", "a"); err != nil || !ok || got.Labels["team"] != "z" || got.ResourceVersion != "" {
		t.Errorf("Get a: %v %v %+v", err, ok, got)
	}
	if _, ok, err := s.Get("", "b"); ok || err != nil {
		t.Errorf("Get b, deleted: %v %v", ok, err)
	}
	sel := fields.ParseSelectorOrDie("status.phase=Active,metadata.name=a")
	if !sel.Matches(evs[0].Pod.Fields()) {
		t.Errorf("fields %v do not match %s", evs[0].Pod.Fields(), sel)
	}
}

// TestAge checks the staleness a store reports: zero while a watch of its
// feed is open, growing after it ends, zero again once a watch reopens.
func TestAge(t *testing.T) {
	s := kindstore.NewNamespaces()
	fw := watch.NewFake()
	lw := s.Heard(&cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return &corev1.NamespaceList{}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return fw, nil },
	})
	future := time.Now().Add(time.Hour)
	if s.Age(future) < time.Hour-time.Minute {
		t.Fatalf("age before any contact %v, want since creation", s.Age(future))
	}
	if _, err := lw.ListWithContext(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Age(future) != 0 {
		t.Fatalf("age with a watch open %v, want 0", s.Age(future))
	}
	go fw.Add(namespace("a", "1", "x"))
	if ev := <-w.ResultChan(); ev.Type != watch.Added {
		t.Fatalf("forwarded %v", ev.Type)
	}
	fw.Stop() // the API server ends the watch
	for range w.ResultChan() {
	}
	// The forwarder records the end before it closes the channel.
	if age := s.Age(future); age < time.Hour-time.Minute {
		t.Fatalf("age after the watch ended %v, want about an hour at an hour's time", age)
	}
	w.Stop()
}

// TestRecreated checks that an object deleted and created again under the
// same name, which an informer delivers as an update with a new UID (its
// cache is keyed by name, so after a relist it never says the old one was
// deleted), or a feed as an add with no delete, replaces the old one:
// watchers see the old UID DELETED and the new one ADDED, and lists and
// gets hold the new one only.
func TestRecreated(t *testing.T) {
	recreated := func(name, uid, team string) *corev1.Namespace {
		ns := namespace(name, "20", team)
		ns.UID = types.UID(uid)
		return ns
	}
	for _, tc := range []struct {
		name string
		feed func(s *kindstore.Namespaces, old, new *corev1.Namespace)
	}{
		{"update with a new UID", func(s *kindstore.Namespaces, old, new *corev1.Namespace) { s.OnUpdate(old, new) }},
		{"relist's update, old unknown", func(s *kindstore.Namespaces, _, new *corev1.Namespace) { s.OnUpdate(nil, new) }},
		{"add with no delete", func(s *kindstore.Namespaces, _, new *corev1.Namespace) { s.OnAdd(new, false) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := kindstore.NewNamespaces()
			old := namespace("a", "10", "x")
			s.OnAdd(old, true)
			s.OnAdd(namespace("b", "11", "y"), true)
			s.MarkSynced()
			_, w := s.Watch(16, nil)
			defer w.Stop()
			tc.feed(s, old, recreated("a", "uid-a2", "z"))
			<-w.Ready()
			evs := w.Take(nil)
			if len(evs) != 2 || evs[0].Type != store.Deleted || evs[0].Pod.UID != old.UID ||
				evs[1].Type != store.Added || evs[1].Pod.UID != "uid-a2" {
				t.Fatalf("events %+v, want DELETED uid-a and ADDED uid-a2", evs)
			}
			_, objs := s.List()
			if len(objs) != 2 || objs[0].UID != "uid-a2" || objs[1].Name != "b" {
				t.Fatalf("list %+v, want a (uid-a2) and b", objs)
			}
			if got, ok, err := s.Get("", "a"); err != nil || !ok || got.UID != "uid-a2" || got.Labels["team"] != "z" {
				t.Fatalf("Get a: %v %v %+v", err, ok, got)
			}
			// The old one's delete, late, removes nothing.
			s.OnDelete(old)
			if _, objs := s.List(); len(objs) != 2 {
				t.Fatalf("the old UID's delete removed %+v", objs)
			}
			s.OnDelete(recreated("a", "uid-a2", "z"))
			if _, ok, _ := s.Get("", "a"); ok {
				t.Fatal("a is held after its delete")
			}
		})
	}
}
