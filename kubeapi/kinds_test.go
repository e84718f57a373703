package kubeapi_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/podsapi/podsapi/kindstore"
	"github.com/podsapi/podsapi/kubeapi"
	"github.com/podsapi/podsapi/test/podstest"
)

// namespace returns a namespace with the label team=<team>.
func namespace(name, team string) *corev1.Namespace {
	return &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), ResourceVersion: "17", Labels: map[string]string{"team": team},
			CreationTimestamp: metav1.Unix(time.Now().Unix(), 0)},
		Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
	}
}

// kindsHandler returns a handler of no pods serving the namespaces and the
// node of synced kind stores, fed as an informer feeds them.
func kindsHandler(t *testing.T) (*kubeapi.Handler, *kindstore.Namespaces, *kindstore.Nodes) {
	t.Helper()
	nss, nodes := kindstore.NewNamespaces(), kindstore.NewNodes()
	nss.OnAdd(namespace("default", "a"), true)
	nss.OnAdd(namespace("kube-system", "b"), true)
	nss.MarkSynced()
	nodes.OnAdd(&corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: node, UID: "uid-node", Labels: map[string]string{"node-role.kubernetes.io/worker": ""}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
			NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", Architecture: "amd64"},
		},
	}, true)
	nodes.MarkSynced()
	return handler(newStore(), kubeapi.WithNamespaces(nss), kubeapi.WithNode(nodes)), nss, nodes
}

// TestKindsLocal pins which requests of namespaces and nodes the handler
// answers itself and the rights each needs, as the API server's
// RequestInfo reads them.
func TestKindsLocal(t *testing.T) {
	h, _, _ := kindsHandler(t)
	for _, tt := range []struct {
		name, target string
		want         []kubeapi.Access
	}{
		{"list of namespaces", "/api/v1/namespaces", []kubeapi.Access{{Verb: "list", Resource: "namespaces"}}},
		{"watch of namespaces by name", "/api/v1/namespaces?watch=1&fieldSelector=metadata.name%3Ddefault",
			[]kubeapi.Access{{Verb: "watch", Resource: "namespaces", Name: "default", FieldSelector: "metadata.name=default"}}},
		{"get of a namespace held", "/api/v1/namespaces/default", []kubeapi.Access{{Verb: "get", Namespace: "default", Resource: "namespaces", Name: "default"}}},
		{"get of the node", "/api/v1/nodes/" + node, []kubeapi.Access{{Verb: "get", Resource: "nodes", Name: node}}},
		{"list of the node", "/api/v1/nodes?fieldSelector=metadata.name%3D" + node,
			[]kubeapi.Access{{Verb: "list", Resource: "nodes", Name: node, FieldSelector: "metadata.name=" + node}}},

		{"get of a namespace not held", "/api/v1/namespaces/other", nil},
		{"a namespace's subresource", "/api/v1/namespaces/default/status", nil},
		{"the deprecated watch of one namespace", "/api/v1/namespaces/default?watch=true", nil},
		{"list of every node", "/api/v1/nodes", nil},
		{"list of another node", "/api/v1/nodes?fieldSelector=metadata.name%3Dnode-2", nil},
		{"get of another node", "/api/v1/nodes/node-2", nil},
		{"the node's subresource", "/api/v1/nodes/" + node + "/proxy", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := h.Local(httptest.NewRequest("GET", tt.target, nil))
			if ok != (tt.want != nil) || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Local(%s) = %+v, %v; want %+v", tt.target, got, ok, tt.want)
			}
		})
	}
	// Before their stores sync, the kinds are the API server's.
	unsynced := handler(newStore(), kubeapi.WithNamespaces(kindstore.NewNamespaces()))
	if _, ok := unsynced.Local(httptest.NewRequest("GET", "/api/v1/namespaces", nil)); ok {
		t.Error("a list of namespaces is local before the store synced")
	}
	// Without the options, they are the API server's.
	if _, ok := handler(newStore()).Local(httptest.NewRequest("GET", "/api/v1/namespaces/default", nil)); ok {
		t.Error("a get of a namespace is local without WithNamespaces")
	}
}

// TestKinds runs client-go's typed clients, in JSON and protobuf, against
// the handler's namespaces and node: lists with selectors, gets, a watch
// resumed from a list's resourceVersion seeing an update and a delete, and
// the API server's errors.
func TestKinds(t *testing.T) {
	for _, ct := range contentTypes {
		t.Run(ct.name, func(t *testing.T) {
			h, nss, nodes := kindsHandler(t)
			cs := serve(t, h).clientset(t, ct.contentType)
			ctx := context.Background()
			list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Items) != 2 || list.Items[0].Name != "default" || list.ResourceVersion != nss.Revision(2) || list.Items[0].ResourceVersion != nss.Revision(1) {
				t.Fatalf("list: %+v", list)
			}
			sel, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: "team=b", FieldSelector: "status.phase=Active"})
			if err != nil || len(sel.Items) != 1 || sel.Items[0].Name != "kube-system" {
				t.Fatalf("selected: %v %+v", err, sel)
			}
			_, err = cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{FieldSelector: "spec.finalizers=x"})
			if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "field label not supported: spec.finalizers") {
				t.Fatalf("unsupported field label: %v", err)
			}
			ns, err := cs.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
			if err != nil || ns.Labels["team"] != "b" || ns.Kind != "" && ns.Kind != "Namespace" {
				t.Fatalf("get: %v %+v", err, ns)
			}
			n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil || n.Status.NodeInfo.KubeletVersion != "v1.37.2" || n.ResourceVersion != nodes.Revision(1) {
				t.Fatalf("get node: %v %+v", err, n)
			}
			nl, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + node + ",spec.unschedulable=false"})
			if err != nil || len(nl.Items) != 1 {
				t.Fatalf("list node: %v %+v", err, nl)
			}

			w, err := cs.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			// A relist of the API server that changes only its
			// resourceVersion is no change.
			same := namespace("default", "a")
			same.CreationTimestamp = list.Items[0].CreationTimestamp
			same.ResourceVersion = "99"
			nss.OnUpdate(nil, same)
			changed := same.DeepCopy()
			changed.Labels["team"] = "c"
			nss.OnUpdate(nil, changed)
			nss.OnDelete(namespace("kube-system", "b"))
			ev := next(t, w)
			if got, ok := ev.Object.(*corev1.Namespace); ev.Type != watch.Modified || !ok || got.Labels["team"] != "c" || got.ResourceVersion != nss.Revision(3) {
				t.Fatalf("first event %s %+v, want MODIFIED default team=c at %s", ev.Type, ev.Object, nss.Revision(3))
			}
			ev = next(t, w)
			if got, ok := ev.Object.(*corev1.Namespace); ev.Type != watch.Deleted || !ok || got.Name != "kube-system" {
				t.Fatalf("second event %s %+v, want DELETED kube-system", ev.Type, ev.Object)
			}
		})
	}
}

// TestKindsForms asks for the namespaces and the node as metadata (client-go's
// metadata client) and as Tables of the API server's columns.
func TestKindsForms(t *testing.T) {
	h, _, _ := kindsHandler(t)
	s := serve(t, h)
	client, err := metadata.NewForConfig(s.config(""))
	if err != nil {
		t.Fatal(err)
	}
	ml, err := client.Resource(corev1.SchemeGroupVersion.WithResource("namespaces")).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(ml.Items) != 2 || ml.Items[1].Name != "kube-system" || ml.Items[1].Labels["team"] != "b" {
		t.Fatalf("metadata list: %v %+v", err, ml)
	}
	for _, c := range []struct {
		target string
		cols   []string
		cells  []any
	}{
		{"/api/v1/namespaces/default", []string{"Name", "Status", "Age"}, []any{"default", "Active"}},
		{"/api/v1/nodes/" + node, []string{"Name", "Status", "Roles", "Age", "Version", "Internal-IP", "External-IP", "OS-Image", "Kernel-Version", "Container-Runtime"},
			[]any{node, "Ready", "worker", "<unknown>", "v1.37.2", "10.0.0.1", "<none>", "<unknown>", "<unknown> (amd64)", "<unknown>"}},
	} {
		table, cols := s.table(t, c.target)
		if !reflect.DeepEqual(cols, c.cols) || len(table.Rows) != 1 {
			t.Fatalf("%s: columns %v, %d rows", c.target, cols, len(table.Rows))
		}
		cells := table.Rows[0].Cells
		if c.cells[0] == node {
			// The node's creationTimestamp is unset: AGE is <unknown>.
			if !reflect.DeepEqual(cells, c.cells) {
				t.Errorf("%s: cells %v, want %v", c.target, cells, c.cells)
			}
		} else if !reflect.DeepEqual(cells[:2], c.cells) {
			t.Errorf("%s: cells %v, want %v", c.target, cells, c.cells)
		}
	}
	resp, body := s.get(t, "/api/v1/namespaces?labelSelector=team%3Da", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
	if resp.StatusCode != 406 || !strings.Contains(string(body), "(*core.NamespaceList)") {
		t.Errorf("metadata of a list: %d %s", resp.StatusCode, body)
	}
}

// table gets target as a meta.k8s.io/v1 Table, and returns it and the
// names of its columns.
func (s *served) table(t *testing.T, target string) (metav1.Table, []string) {
	t.Helper()
	resp, body := s.get(t, target, "application/json;as=Table;g=meta.k8s.io;v=v1")
	var table metav1.Table
	if err := json.Unmarshal(body, &table); resp.StatusCode != 200 || err != nil {
		t.Fatalf("%s: %d %v %s", target, resp.StatusCode, err, body)
	}
	var cols []string
	for _, d := range table.ColumnDefinitions {
		cols = append(cols, d.Name)
	}
	return table, cols
}

// TestKindsInformer runs client-go shared informers of the namespaces and
// of the node (pinned by metadata.name, as an agent's is) through the
// handler: they sync (by client-go's streaming list, sendInitialEvents
// and its bookmark) and see a namespace added and the node changed.
func TestKindsInformer(t *testing.T) {
	h, nss, nodes := kindsHandler(t)
	client := serve(t, h).clientset(t, "application/vnd.kubernetes.protobuf").CoreV1().RESTClient()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := make(chan string, 8)
	nsInf := cache.NewSharedIndexInformer(cache.NewListWatchFromClient(client, "namespaces", "", fields.Everything()), &corev1.Namespace{}, 0, cache.Indexers{})
	_, _ = nsInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) { seen <- "ns/" + obj.(*corev1.Namespace).Name }})
	nodeInf := cache.NewSharedIndexInformer(cache.NewListWatchFromClient(client, "nodes", "", fields.OneTermEqualSelector("metadata.name", node)), &corev1.Node{}, 0, cache.Indexers{})
	_, _ = nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj any) { seen <- "node/" + obj.(*corev1.Node).Labels["zone"] }})
	go nsInf.RunWithContext(ctx)
	go nodeInf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(t.Context().Done(), nsInf.HasSynced, nodeInf.HasSynced) {
		t.Fatal("the informers did not sync")
	}
	for range 2 {
		<-seen // default, kube-system
	}
	nss.OnAdd(namespace("new", "c"), false)
	nodes.OnUpdate(nil, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "uid-node", Labels: map[string]string{"zone": "z1"}}})
	got := map[string]bool{}
	deadline, stop := podstest.NearDeadline(t)
	defer stop()
	for len(got) < 2 {
		select {
		case s := <-seen:
			got[s] = true
		case <-deadline:
			t.Fatalf("saw %v, want ns/new and node/z1", got)
		}
	}
	if !got["ns/new"] || !got["node/z1"] {
		t.Fatalf("saw %v, want ns/new and node/z1", got)
	}
}
