package kubeapi_test

import (
	"context"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/diff"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// recorder records what an informer's handler is told, one line a change.
type recorder chan string

func (r recorder) handler() cache.ResourceEventHandlerFuncs {
	key := func(obj any) string {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		p := obj.(*corev1.Pod)
		return p.Namespace + "/" + p.Name
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { r <- "ADDED " + key(obj) },
		UpdateFunc: func(old, cur any) {
			if old.(*corev1.Pod).ResourceVersion != cur.(*corev1.Pod).ResourceVersion {
				r <- "MODIFIED " + key(cur)
			}
		},
		DeleteFunc: func(obj any) { r <- "DELETED " + key(obj) },
	}
}

// expect waits for the lines want, in any order within the call.
func (r recorder) expect(t *testing.T, want ...string) {
	t.Helper()
	deadline, stop := podstest.NearDeadline(t)
	defer stop()
	var got []string
	for len(got) < len(want) {
		select {
		case l := <-r:
			got = append(got, l)
		case <-deadline:
			t.Fatalf("informer got %q, want %q", got, want)
		}
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Fatalf("informer got %q, want %q", got, want)
	}
}

// startInformer starts a pod informer of cs pinned to the node, as agents
// start theirs, and returns its lister's indexer once synced.
func startInformer(t *testing.T, cs kubernetes.Interface, rec recorder) cache.Indexer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = pinned
	}))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(rec.handler()); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	return inf.GetIndexer()
}

// served returns what the store holds as the informer must see it: each pod
// with the revision of its version as its resourceVersion.
func expected(t *testing.T, st *store.Store) map[string]*corev1.Pod {
	t.Helper()
	_, pods := st.List()
	out := make(map[string]*corev1.Pod, len(pods))
	for _, p := range pods {
		pod := &corev1.Pod{}
		if err := pod.Unmarshal(p.Raw()); err != nil {
			t.Fatal(err)
		}
		pod.ResourceVersion = st.Revision(p.Version)
		out[p.Namespace+"/"+p.Name] = pod
	}
	return out
}

// cached returns the pods of an informer's indexer, without their kind
// (which decoding sets or not by encoding).
func cached(idx cache.Indexer) map[string]*corev1.Pod {
	out := map[string]*corev1.Pod{}
	for _, obj := range idx.List() {
		p := obj.(*corev1.Pod).DeepCopy()
		p.TypeMeta = metav1.TypeMeta{}
		out[p.Namespace+"/"+p.Name] = p
	}
	return out
}

// converge waits until the informer's cache equals what the store holds:
// the informer sees exactly the node's pods, as podsapi serves them.
func converge(t *testing.T, idx cache.Indexer, st *store.Store, rec recorder) {
	t.Helper()
	want := expected(t, st)
	for _, p := range want {
		p.TypeMeta = metav1.TypeMeta{}
	}
	deadline, stop := podstest.NearDeadline(t)
	defer stop()
	for {
		got := cached(idx)
		if apiequality.Semantic.DeepEqual(got, want) {
			return
		}
		select {
		case <-rec:
		case <-deadline:
			t.Fatalf("informer's cache differs from the store (-got +want):\n%s\nkeys got %v want %v", diff.Diff(got, want), slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		}
	}
}

// TestInformer runs an unchanged client-go SharedInformer, pinned to the
// node as agents pin theirs, against the handler in each encoding: it syncs
// with exactly the node's pods (by the streaming list client-go uses by
// default), and every pod added, changed or deleted in the store reaches it.
func TestInformer(t *testing.T) {
	transports := []struct {
		name  string
		serve func(*testing.T, http.Handler) *served
	}{{"tls-h2", serve}, {"plain-http1", servePlain}}
	for _, tr := range transports {
		for _, ct := range contentTypes {
			t.Run(tr.name+"/"+ct.name, func(t *testing.T) { testInformer(t, tr.serve, ct.contentType) })
		}
	}
}

// testInformer is TestInformer over one transport in one encoding.
func testInformer(t *testing.T, serve func(*testing.T, http.Handler) *served, contentType string) {
	st := newStore(pod("default", "web-1", 1), pod("kube-system", "dns-1", 2))
	s := serve(t, handler(st))
	rec := make(recorder, 100)
	idx := startInformer(t, s.clientset(t, contentType), rec)
	rec.expect(t, "ADDED default/web-1", "ADDED kube-system/dns-1")
	converge(t, idx, st, rec)

	changed := pod("default", "web-1", 1)
	changed.Labels["version"] = "2"
	st.Upsert(changed)
	rec.expect(t, "MODIFIED default/web-1")
	st.Upsert(pod("default", "web-2", 3))
	rec.expect(t, "ADDED default/web-2")
	st.Delete(podstest.UID("kube-system", "dns-1"))
	rec.expect(t, "DELETED kube-system/dns-1")
	converge(t, idx, st, rec)

	// The informer synced by the streaming list, in the encoding
	// it asked for.
	var streamed bool
	for _, x := range s.swap.exchanges() {
		q, _ := url.ParseQuery(x.query[strings.Index(x.query, "?")+1:])
		if q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true" {
			streamed = true
			if want := contentType; !strings.HasPrefix(x.contentType, want) {
				t.Errorf("watch answered in %q, want %q", x.contentType, want)
			}
		}
	}
	if !streamed {
		t.Errorf("the informer made no streaming list: %+v", s.swap.exchanges())
	}
}

// listThenWatch turns client-go's streaming list off for the test: its
// informers list, then watch from the list's resourceVersion, as client-go
// did before 1.35 and does against API servers without the streaming list.
type listThenWatch struct{ clientfeatures.Gates }

func (g listThenWatch) Enabled(key clientfeatures.Feature) bool {
	if key == clientfeatures.WatchListClient {
		return false
	}
	return g.Gates.Enabled(key)
}

// TestInformerListThenWatch is TestInformer for an informer that lists and
// then watches from the list's resourceVersion.
func TestInformerListThenWatch(t *testing.T) {
	gates := clientfeatures.FeatureGates()
	clientfeatures.ReplaceFeatureGates(listThenWatch{gates})
	t.Cleanup(func() { clientfeatures.ReplaceFeatureGates(gates) })
	for _, ct := range contentTypes {
		t.Run(ct.name, func(t *testing.T) {
			st := newStore(pod("default", "web-1", 1), pod("kube-system", "dns-1", 2))
			s := serve(t, handler(st))
			rec := make(recorder, 100)
			idx := startInformer(t, s.clientset(t, ct.contentType), rec)
			rec.expect(t, "ADDED default/web-1", "ADDED kube-system/dns-1")
			st.Delete(podstest.UID("default", "web-1"))
			st.Upsert(pod("default", "web-3", 4))
			rec.expect(t, "DELETED default/web-1", "ADDED default/web-3")
			converge(t, idx, st, rec)
			var listed, watched bool
			for _, x := range s.swap.exchanges() {
				q, _ := url.ParseQuery(x.query[strings.Index(x.query, "?")+1:])
				switch {
				case q.Get("sendInitialEvents") != "":
					t.Errorf("a streaming list with the feature off: %s", x.query)
				case q.Get("watch") == "true" && q.Get("resourceVersion") != "":
					watched = true
				case q.Get("watch") == "":
					listed = true
					if !strings.HasPrefix(x.contentType, ct.contentType) {
						t.Errorf("list answered in %q, want %q", x.contentType, ct.contentType)
					}
				}
			}
			if !listed || !watched {
				t.Errorf("listed %v, watched from its resourceVersion %v: %+v", listed, watched, s.swap.exchanges())
			}
		})
	}
}
