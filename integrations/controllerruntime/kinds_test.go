package controllerruntime_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/podsapi/podsapi/integrations/harness"
)

// The kinds of TestCacheKinds's caches, as its recorders name them.
const (
	kindNamespaces  = "namespaces"
	kindReplicaSets = "replicasets"
)

// The ways TestCacheKinds reads them: the API server, the door's full view
// and its node view, each from a kubeconfig whose current context is the
// way's.
var kindWays = []struct{ name, context, label string }{
	{"direct", harness.ContextDirect, "directly"},
	{"full", harness.ContextPodsapi, "through podsapi's full view (the door's URL)"},
	{"node", harness.ContextNodeView, "through podsapi's node view (the door's URL + /views/node)"},
}

// TestCacheKinds runs controller-runtime's cache of Namespaces and
// ReplicaSets (typed informers, cluster-wide, as a controller that
// describes pods by their namespace and owner configures it) three times
// at once, each as its own ServiceAccount so that the audit log tells
// their requests apart: directly against the API server, through the
// door's full view and through its node view.
//
// Directly and through the full view, the caches must hold the same
// objects and deliver the same events, for every change of a namespace or
// a ReplicaSet. Through the node view, they must hold the node's slice
// exactly: the namespaces that hold the node's pods and the ReplicaSets
// that own them; a ReplicaSet (and a namespace) is added when the first
// of its pods lands on the node, not when its second does, and deleted
// when its last pod leaves, not before; a change of a ReplicaSet of the
// slice arrives within --workload-refresh; nothing outside the slice
// arrives at all.
//
// It measures what each cache cost the API server (the audit log, per
// user) and fails if the node view's cost it any request for namespaces
// or ReplicaSets, or the full view's any for namespaces.
func TestCacheKinds(t *testing.T) {
	ctrllog.SetLogger(testr.New(t))
	cluster := harness.StartCluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k := kindsCluster{t: t, cluster: cluster}
	const node = "node-1"

	// The cluster before podsapi and the caches start: a namespace with two
	// pods of the node (one ReplicaSet's) and one of another node
	// (another's), a namespace whose ReplicaSet has no pod yet, and a
	// quiet one. podsapi starts on it as on a running node: its node view
	// has synced once it has got the owners of the pods it found.
	k.namespace("apps", map[string]string{"team": "a"})
	k.namespace("elsewhere", nil)
	k.namespace("quiet", nil)
	web1, web2 := k.replicaSet("apps", "web-1"), k.replicaSet("apps", "web-2")
	batch1, idle := k.replicaSet("elsewhere", "batch-1"), k.replicaSet("quiet", "idle")
	k.pod(web1, "p1", node)
	k.pod(web1, "p2", node)
	k.pod(web2, "away", "node-2")
	// A short refresh, so that a change of a ReplicaSet of the slice
	// reaches the node view within the test's wait.
	pa := cluster.StartPodsapi(t, node, harness.WithNodeView(), harness.WithFlags("--workload-refresh", "1s"))
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"replicasets"}, Verbs: []string{"get", "list", "watch"}},
	}
	agents := map[string]*harness.Agent{}
	runs := map[string]*run{}
	for _, w := range kindWays {
		agents[w.name] = cluster.Agent(t, "controllers", w.name, rules...)
	}
	for _, w := range kindWays {
		runs[w.name] = startKindsCache(ctx, t, agents[w.name].Kubeconfig(t, pa, w.context))
	}

	// Each cache's start: synced, and its first events the adds of what it
	// holds.
	synced := map[string]bool{}
	contents := map[string]map[string][]string{}
	for _, w := range kindWays {
		for _, kind := range []string{kindNamespaces, kindReplicaSets} {
			t.Run(w.name+"/"+kind+"/synced", func(t *testing.T) {
				r := runs[w.name]
				if err := r.waitSynced(kind); err != nil {
					t.Fatal(err)
				}
				held := r.kindContents(ctx, t, kind)
				var adds, want []string
				for range held {
					adds = append(adds, r.events[kind].next(t))
				}
				for _, o := range held {
					want = append(want, "add "+o.name)
				}
				slices.Sort(adds)
				if !slices.Equal(adds, want) {
					t.Fatalf("first events %q, want the adds of what it holds: %q", adds, want)
				}
				synced[w.name+"/"+kind] = true
				if contents[w.name] == nil {
					contents[w.name] = map[string][]string{}
				}
				contents[w.name][kind] = ids(held)
			})
		}
	}
	t.Run("full view holds what the API server holds", func(t *testing.T) {
		for _, kind := range []string{kindNamespaces, kindReplicaSets} {
			if d, f := contents["direct"][kind], contents["full"][kind]; !slices.Equal(d, f) {
				t.Errorf("%s: directly %q, through the full view %q", kind, d, f)
			}
		}
	})
	t.Run("node view holds the node's slice", func(t *testing.T) {
		want := map[string][]string{
			kindNamespaces:  {"/apps"},
			kindReplicaSets: {"apps/web-1 " + string(web1.UID)},
		}
		if got := contents["node"][kindReplicaSets]; !slices.Equal(got, want[kindReplicaSets]) {
			t.Errorf("replicasets: %q, want %q", got, want[kindReplicaSets])
		}
		if got := names(contents["node"][kindNamespaces]); !slices.Equal(got, want[kindNamespaces]) {
			t.Errorf("namespaces: %q, want %q", got, want[kindNamespaces])
		}
	})

	t.Run("what each cost the API server", func(t *testing.T) {
		resources := []string{"namespaces", "replicasets"}
		for _, w := range kindWays {
			asked := cluster.Asked(t, agents[w.name].User())
			cost := map[string]int{}
			for _, res := range resources {
				for _, verb := range []string{"get", "list", "watch"} {
					cost[res] += asked[verb+" "+res]
				}
			}
			harness.Record(t, "controller-runtime v0.25.3 cache (typed namespace and ReplicaSet informers), at its start", w.label,
				"the controller's requests at the API server: "+asked.String())
			switch {
			case w.name == "direct" && (cost["namespaces"] == 0 || cost["replicasets"] == 0):
				t.Errorf("directly, no request for namespaces or replicasets reached the API server: %v", asked)
			case w.name == "full" && cost["namespaces"] != 0:
				t.Errorf("through the full view, %d requests for namespaces reached the API server: %v", cost["namespaces"], asked)
			case w.name == "node" && cost["namespaces"]+cost["replicasets"] != 0:
				t.Errorf("through the node view, requests for namespaces or replicasets reached the API server: %v", asked)
			}
		}
		t.Logf("podsapi itself asked the API server: %v", cluster.Asked(t, harness.PodsapiUser))
	})

	// Each change, and the events it must bring each way: cluster is the
	// direct and full views' (the same), node the node view's. A kind
	// without events brings none: the next change's events of that kind
	// must come first.
	type events map[string][]string
	changes := []struct {
		name          string
		change        func()
		cluster, node events
	}{
		{"a namespace added", func() { k.namespace("added", nil) },
			events{kindNamespaces: {"add /added"}}, nil},
		{"a namespace of the slice labelled", func() { k.labelNamespace("apps", "tier", "gold") },
			events{kindNamespaces: {"update /apps team=a,tier=gold"}}, events{kindNamespaces: {"update /apps team=a,tier=gold"}}},
		{"a ReplicaSet added", func() { k.replicaSet("apps", "web-3") },
			events{kindReplicaSets: {"add apps/web-3"}}, nil},
		{"a ReplicaSet of the slice labelled", func() { k.labelReplicaSet("apps", "web-1", "tier", "gold") },
			events{kindReplicaSets: {"update apps/web-1 tier=gold"}}, events{kindReplicaSets: {"update apps/web-1 tier=gold"}}},
		{"the first pod of a ReplicaSet lands", func() { k.pod(web2, "q1", pa.Node) },
			nil, events{kindReplicaSets: {"add apps/web-2"}}},
		{"its second pod lands", func() { k.pod(web2, "q2", pa.Node) }, nil, nil},
		{"the first pod of a namespace lands", func() { k.pod(batch1, "r1", pa.Node) },
			nil, events{kindNamespaces: {"add /elsewhere"}, kindReplicaSets: {"add elsewhere/batch-1"}}},
		{"a ReplicaSet's first pod of two leaves", func() { cluster.DeletePod(t, "apps", "q1") }, nil, nil},
		{"the first pod of another namespace lands", func() { k.pod(idle, "s1", pa.Node) },
			nil, events{kindNamespaces: {"add /quiet"}, kindReplicaSets: {"add quiet/idle"}}},
		{"a ReplicaSet's last pod leaves", func() { cluster.DeletePod(t, "apps", "q2") },
			nil, events{kindReplicaSets: {"delete apps/web-2"}}},
		{"a namespace's last pod leaves", func() { cluster.DeletePod(t, "elsewhere", "r1") },
			nil, events{kindNamespaces: {"delete /elsewhere"}, kindReplicaSets: {"delete elsewhere/batch-1"}}},
		{"a ReplicaSet deleted", func() { k.deleteReplicaSet("apps", "web-3") },
			events{kindReplicaSets: {"delete apps/web-3"}}, nil},
		// Without a namespace controller, a deleted namespace stays
		// Terminating: an update.
		{"a namespace deleted", func() { k.deleteNamespace("added") },
			events{kindNamespaces: {"update /added deleting"}}, nil},
	}
	for _, c := range changes {
		c.change()
		for _, w := range kindWays {
			want := c.cluster
			if w.name == "node" {
				want = c.node
			}
			for _, kind := range []string{kindNamespaces, kindReplicaSets} {
				if len(want[kind]) == 0 {
					continue
				}
				t.Run(w.name+"/"+kind+"/"+c.name, func(t *testing.T) {
					key := w.name + "/" + kind
					if !synced[key] {
						t.Skip("not synced, or an earlier event was not the one expected")
					}
					// Every later event of the cache would be compared
					// with the wrong one: its later changes are skipped.
					defer func() { synced[key] = !t.Failed() }()
					for _, e := range want[kind] {
						if got := runs[w.name].events[kind].next(t); got != e {
							t.Fatalf("event %q, want %q (all events: %q)", got, e, runs[w.name].events[kind].all())
						}
					}
				})
			}
		}
	}

	t.Run("same cache contents at the end", func(t *testing.T) {
		for _, kind := range []string{kindNamespaces, kindReplicaSets} {
			direct, full := ids(runs["direct"].kindContents(ctx, t, kind)), ids(runs["full"].kindContents(ctx, t, kind))
			if !slices.Equal(direct, full) {
				t.Errorf("%s: directly %q, through the full view %q", kind, direct, full)
			}
		}
		node := runs["node"]
		if got, want := names(ids(node.kindContents(ctx, t, kindNamespaces))), []string{"/apps", "/quiet"}; !slices.Equal(got, want) {
			t.Errorf("node view's namespaces: %q, want %q", got, want)
		}
		if got, want := ids(node.kindContents(ctx, t, kindReplicaSets)), []string{
			"apps/web-1 " + string(web1.UID), "quiet/idle " + string(idle.UID),
		}; !slices.Equal(got, want) {
			t.Errorf("node view's replicasets: %q, want %q", got, want)
		}
	})
	for _, w := range kindWays {
		for _, kind := range []string{kindNamespaces, kindReplicaSets} {
			t.Logf("%s/%s events: %q", w.name, kind, runs[w.name].events[kind].all())
		}
	}
}

// kindsCluster makes TestCacheKinds's objects through the API server, as
// its admin.
type kindsCluster struct {
	t       *testing.T
	cluster *harness.Cluster
}

func (k kindsCluster) namespace(name string, labels map[string]string) {
	k.t.Helper()
	if _, err := k.cluster.Admin.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		k.t.Fatal(err)
	}
}

func (k kindsCluster) labelNamespace(name, key, value string) {
	k.t.Helper()
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, key, value)
	if _, err := k.cluster.Admin.CoreV1().Namespaces().Patch(context.Background(), name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		k.t.Fatal(err)
	}
}

func (k kindsCluster) deleteNamespace(name string) {
	k.t.Helper()
	if err := k.cluster.Admin.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		k.t.Fatal(err)
	}
}

// replicaSet creates a ReplicaSet of no replicas (there is no controller
// manager: its pods are the test's) labelled app=NAME.
func (k kindsCluster) replicaSet(ns, name string) *appsv1.ReplicaSet {
	k.t.Helper()
	labels := map[string]string{"app": name}
	rs, err := k.cluster.Admin.AppsV1().ReplicaSets(ns).Create(context.Background(), &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: harness.Pod(ns, name, "").Spec},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		k.t.Fatal(err)
	}
	return rs
}

func (k kindsCluster) labelReplicaSet(ns, name, key, value string) {
	k.t.Helper()
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, key, value)
	if _, err := k.cluster.Admin.AppsV1().ReplicaSets(ns).Patch(context.Background(), name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		k.t.Fatal(err)
	}
}

func (k kindsCluster) deleteReplicaSet(ns, name string) {
	k.t.Helper()
	if err := k.cluster.Admin.AppsV1().ReplicaSets(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		k.t.Fatal(err)
	}
}

// pod creates a pod of rs (its controller owner reference) on node.
func (k kindsCluster) pod(rs *appsv1.ReplicaSet, name, node string) {
	k.t.Helper()
	p := harness.Pod(rs.Namespace, name, node)
	p.Labels = rs.Spec.Template.Labels
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}
	k.cluster.CreatePod(k.t, p)
}

// startKindsCache starts a controller-runtime cache from the kubeconfig
// with a typed informer of Namespaces and one of ReplicaSets (startRun).
func startKindsCache(ctx context.Context, t *testing.T, kubeconfig string) *run {
	t.Helper()
	return startRun(ctx, t, newCache(t, kubeconfig, cache.Options{}),
		map[string]client.Object{kindNamespaces: &corev1.Namespace{}, kindReplicaSets: &appsv1.ReplicaSet{}})
}

// heldObject is an object a cache holds: "NAMESPACE/NAME" (a namespace's
// is "/NAME") and its UID.
type heldObject struct{ name, uid string }

// kindContents lists the cache's objects of kind, sorted by name.
func (r *run) kindContents(ctx context.Context, t *testing.T, kind string) []heldObject {
	t.Helper()
	var out []heldObject
	add := func(o metav1.Object) {
		out = append(out, heldObject{o.GetNamespace() + "/" + o.GetName(), string(o.GetUID())})
	}
	switch kind {
	case kindNamespaces:
		var list corev1.NamespaceList
		if err := r.cache.List(ctx, &list); err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			add(&list.Items[i])
		}
	case kindReplicaSets:
		var list appsv1.ReplicaSetList
		if err := r.cache.List(ctx, &list); err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			add(&list.Items[i])
		}
	}
	slices.SortFunc(out, func(a, b heldObject) int { return strings.Compare(a.name, b.name) })
	return out
}

// ids returns "NAME UID" of each object.
func ids(objs []heldObject) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.name+" "+o.uid)
	}
	return out
}

// names returns the names of ids' "NAME UID" strings.
func names(ids []string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		name, _, _ := strings.Cut(id, " ")
		out = append(out, name)
	}
	return out
}
