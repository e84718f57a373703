package door_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/podsapi/podsapi/kubeapi/door"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/kubetest"
)

// kindsNode is the node of the door of the kinds' tests.
const kindsNode = "node-1"

// openKinds opens the door as podsapi-server does (Settings.Open, with the
// shared kinds), its own credentials the admin's, reaching the API server
// at host; serves it until the end of the test; and waits until its kinds
// have synced.
func openKinds(t *testing.T, cp *kubetest.ControlPlane, host string, reg *prometheus.Registry) (*door.API, *served) {
	t.Helper()
	st := store.New()
	st.MarkSynced()
	return openViews(t, cp, host, reg, st, nil)
}

// openViews is openKinds with the node's pods st and, when slice is not
// nil, the node view of slice.
func openViews(t *testing.T, cp *kubetest.ControlPlane, host string, reg *prometheus.Registry, st *store.Store, slice door.Slice) (*door.API, *served) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile, ca := kubetest.ServingCert(t, dir)
	s := door.Settings{
		Address: "127.0.0.1:0", CertFile: certFile, KeyFile: keyFile,
		TokenCacheTTL: door.DefaultTokenCacheTTL, AllowCacheTTL: door.DefaultAllowCacheTTL, DenyCacheTTL: door.DefaultDenyCacheTTL,
		Kinds: true, NodeView: slice != nil,
	}
	a, err := s.Open(door.Env{
		Pods: st, Node: kindsNode, Kubeconfig: cp.Kubeconfig(t, kubetest.AdminUser, host), Slice: slice,
		Logger: slog.New(slog.DiscardHandler), Registerer: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	waitUntil(t, "the kinds synced", func() bool { return a.Kinds.Namespaces.Synced() && a.Kinds.Node.Synced() })
	return a, &served{addr: a.Addr().String(), ca: ca, stop: func() error { cancel(); return <-done }}
}

// createNodes creates the nodes of the tests: the door's and another.
func createNodes(t *testing.T, cp *kubetest.ControlPlane) {
	t.Helper()
	for _, name := range []string{kindsNode, "node-2"} {
		if _, err := cp.Admin.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: map[string]string{"node-role.kubernetes.io/worker": ""},
		}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDoorAPIServerKinds asks the door (with its shared watches of the
// namespaces and the node) and the real API server the same requests of
// namespaces and nodes with the same tokens, in every form, and compares
// the answers: the code, the kind, the items (by name and labels) or the
// error (Status byte for byte), a caller without rights included; then
// runs client-go informers of namespaces and of the node through the door
// and counts the API server's watches.
func TestDoorAPIServerKinds(t *testing.T) {
	cp := kubetest.Start(t, nsReader, nsLister, nobody)
	grantRoles(t, cp)
	createNodes(t, cp)
	base := watchesOpen(t, cp)
	reg := prometheus.NewRegistry()
	_, s := openKinds(t, cp, cp.Host(), reg)
	doorClient, apiClient := s.client(), apiClient(t, cp)
	admin, lister, none := cp.Token(kubetest.AdminUser), cp.Token(nsLister), cp.Token(nobody)
	const (
		metadataList = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
		metadataOne  = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1"
		table        = "application/json;as=Table;g=meta.k8s.io;v=v1"
	)
	for _, c := range []struct{ name, path, token, accept string }{
		{"list namespaces", "/api/v1/namespaces", admin, ""},
		{"list namespaces, lister", "/api/v1/namespaces", lister, ""},
		{"list namespaces, nobody", "/api/v1/namespaces", none, ""},
		{"get namespace", "/api/v1/namespaces/a", admin, ""},
		{"get namespace, lister", "/api/v1/namespaces/a", lister, ""},
		{"namespaces by name", "/api/v1/namespaces?fieldSelector=metadata.name%3Db", admin, ""},
		{"namespaces by phase and label", "/api/v1/namespaces?fieldSelector=status.phase%3DActive&labelSelector=kubernetes.io%2Fmetadata.name+in+(a,b)", admin, ""},
		{"unsupported field label", "/api/v1/namespaces?fieldSelector=spec.finalizers%3Dx", admin, ""},
		{"bad label selector", "/api/v1/namespaces?labelSelector=a+in+(", admin, ""},
		{"namespaces metadata", "/api/v1/namespaces", admin, metadataList},
		{"namespace metadata v1beta1", "/api/v1/namespaces/b", admin, metadataOne},
		{"metadata of a list", "/api/v1/namespaces", admin, "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"},
		{"namespaces table", "/api/v1/namespaces", admin, table},
		{"get node", "/api/v1/nodes/" + kindsNode, admin, ""},
		{"get node, nobody", "/api/v1/nodes/" + kindsNode, none, ""},
		{"list the node", "/api/v1/nodes?fieldSelector=metadata.name%3D" + kindsNode, admin, ""},
		{"the node, schedulable", "/api/v1/nodes?fieldSelector=metadata.name%3D" + kindsNode + ",spec.unschedulable%3Dfalse", admin, ""},
		{"the node, bad field", "/api/v1/nodes?fieldSelector=metadata.name%3D" + kindsNode + ",status.phase%3DX", admin, ""},
		{"node table", "/api/v1/nodes/" + kindsNode, admin, table},
		{"node metadata", "/api/v1/nodes?fieldSelector=metadata.name%3D" + kindsNode, admin, metadataList},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := getAccept(t, apiClient, "https://"+cp.Host()+c.path, c.token, c.accept)
			got := getAccept(t, doorClient, "https://"+s.addr+c.path, c.token, c.accept)
			if got.code != want.code {
				t.Fatalf("door %d %s; API server %d %s", got.code, got.body, want.code, want.body)
			}
			if got.code != 200 {
				if g, w := strings.TrimSpace(string(got.body)), strings.TrimSpace(string(want.body)); g != w {
					t.Fatalf("door's error %s\nAPI server's %s", g, w)
				}
				return
			}
			if g, w := summary(t, got.body), summary(t, want.body); !reflect.DeepEqual(g, w) {
				t.Fatalf("door's answer %+v\nAPI server's %+v", g, w)
			}
		})
	}
	t.Run("kubectl", func(t *testing.T) { kubectlAgrees(t, cp, s) })
	if local := counted(t, reg, "podsapi_kube_api_requests_total", "route", "local"); local < 20 {
		t.Errorf("the door answered %v requests itself, want the 20 above", local)
	}

	// N informers of namespaces and of the node through the door cost the
	// API server one watch of each.
	const n = 5
	client := clientOf(cp, s, admin).CoreV1().RESTClient()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	added := make(chan string, 2*n)
	var informers []cache.SharedIndexInformer
	for range n {
		nsInf := cache.NewSharedIndexInformer(cache.NewListWatchFromClient(client, "namespaces", "", fields.Everything()), &corev1.Namespace{}, 0, cache.Indexers{})
		_, _ = nsInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
			if ns := obj.(*corev1.Namespace); ns.Name == "c" {
				added <- ns.Name
			}
		}})
		nodeInf := cache.NewSharedIndexInformer(cache.NewListWatchFromClient(client, "nodes", "", fields.OneTermEqualSelector("metadata.name", kindsNode)), &corev1.Node{}, 0, cache.Indexers{})
		informers = append(informers, nsInf, nodeInf)
	}
	for _, inf := range informers {
		go inf.RunWithContext(ctx)
	}
	for _, inf := range informers {
		if !cache.WaitForCacheSync(t.Context().Done(), inf.HasSynced) {
			t.Fatal("an informer did not sync")
		}
	}
	if _, err := cp.Admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for range n {
		<-added
	}
	waitUntil(t, "the door's local watches", func() bool {
		return counted(t, reg, "podsapi_kube_api_requests_in_flight", "route", "local") >= 2*n
	})
	// The API server's own informers renew their watches now and then:
	// the count settles at one more of each.
	var now map[string]float64
	var said string
	waitUntil(t, "one more watch of namespaces and of nodes at the API server", func() bool {
		now = watchesOpen(t, cp)
		if now["namespaces"]-base["namespaces"] == 1 && now["nodes"]-base["nodes"] == 1 {
			return true
		}
		if msg := fmt.Sprintf("the API server has %v more watches of namespaces and %v of nodes, want 1 each", now["namespaces"]-base["namespaces"], now["nodes"]-base["nodes"]); msg != said {
			t.Log(msg)
			said = msg
		}
		return false
	})
	t.Logf("API server's watches: %v before the door, %v with the door and %d informers of each kind through it", base, now, n)
}

// TestDoorAPIServerKindsOutage cuts podsapi off the API server: the door
// keeps answering the namespaces it holds (to a caller whose decision it
// has cached), its age metric grows; once the API server is back, its
// watch resumes and a new namespace reaches a watch through the door.
func TestDoorAPIServerKindsOutage(t *testing.T) {
	cp := kubetest.Start(t, nsReader, nsLister, nobody)
	grantRoles(t, cp)
	createNodes(t, cp)
	proxy := kubetest.NewProxy(t, cp.Host())
	reg := prometheus.NewRegistry()
	a, s := openKinds(t, cp, proxy.Addr(), reg)
	lister := clientOf(cp, s, cp.Token(nsLister))
	admin := clientOf(cp, s, cp.Token(kubetest.AdminUser))
	if _, err := lister.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := admin.CoreV1().Namespaces().Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	proxy.Cut()
	waitUntil(t, "the age of the namespaces to grow", func() bool { return a.Kinds.Namespaces.Age(time.Now()) > 0 })
	list, err := lister.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
	if err != nil || len(list.Items) < 2 {
		t.Fatalf("during the outage: %v, %d namespaces", err, len(list.Items))
	}
	if age := counted(t, reg, "podsapi_kube_api_kind_age_seconds", "resource", "namespaces"); age <= 0 {
		t.Errorf("podsapi_kube_api_kind_age_seconds{resource=namespaces} = %v during the outage, want > 0", age)
	}
	proxy.Restore(t)
	waitUntil(t, "the watch of namespaces to resume", func() bool { return a.Kinds.Namespaces.Age(time.Now()) == 0 })
	if _, err := cp.Admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the door's watch ended during the outage")
			}
			if ns, isNS := ev.Object.(*corev1.Namespace); isNS && ns.Name == "after" {
				return
			}
		case <-t.Context().Done():
			t.Fatal("the new namespace did not reach the door's watch")
		}
	}
}

// kubectlAgrees runs the same kubectl commands of namespaces and the node
// against the door and the API server with the admin's token, and compares
// their output: the items of -o json (names and labels), and the NAME and
// STATUS columns of the default table.
func kubectlAgrees(t *testing.T, cp *kubetest.ControlPlane, s *served) {
	bin := kubectlBin(t)
	dir := t.TempDir()
	ca := filepath.Join(dir, "door-ca.crt")
	if err := os.WriteFile(ca, s.ca, 0o600); err != nil {
		t.Fatal(err)
	}
	doorKC := filepath.Join(dir, "door-kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: door\n  cluster:\n    server: https://" + s.addr +
		"\n    certificate-authority: " + ca + "\nusers:\n- name: admin\n  user:\n    token: " + cp.Token(kubetest.AdminUser) +
		"\ncontexts:\n- name: door\n  context: {cluster: door, user: admin}\ncurrent-context: door\n"
	if err := os.WriteFile(doorKC, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	apiKC := cp.Kubeconfig(t, kubetest.AdminUser, cp.Host())
	run := func(kc string, args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", kc, "--cache-dir", t.TempDir()}, args...)...).Output()
		if err != nil {
			t.Fatalf("kubectl %v: %v", args, err)
		}
		return out
	}
	for _, args := range [][]string{{"get", "ns", "-o", "json"}, {"get", "node", kindsNode, "-o", "json"}} {
		if g, w := summary(t, run(doorKC, args...)), summary(t, run(apiKC, args...)); !reflect.DeepEqual(g, w) {
			t.Errorf("kubectl %v: through the door %+v, from the API server %+v", args, g, w)
		}
	}
	columns := func(out []byte) []string {
		var rows []string
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if f := strings.Fields(line); len(f) >= 2 {
				rows = append(rows, f[0]+" "+f[1])
			}
		}
		return rows
	}
	for _, args := range [][]string{{"get", "ns"}, {"get", "node", kindsNode, "-o", "wide"}} {
		if g, w := columns(run(doorKC, args...)), columns(run(apiKC, args...)); !reflect.DeepEqual(g, w) {
			t.Errorf("kubectl %v: through the door %q, from the API server %q", args, g, w)
		}
	}
}

// shape is what the comparison keeps of an answer: its kind and group
// version, its items' names and labels (or the object's), a table's
// columns and the first cells of its rows (NAME, STATUS).
type shape struct {
	Kind, APIVersion string
	Names            []string
	Labels           []map[string]string
	Columns          []string
	Cells            [][]any
}

func summary(t *testing.T, body []byte) shape {
	t.Helper()
	var v struct {
		metav1.TypeMeta
		Metadata          metav1.ObjectMeta              `json:"metadata"`
		Items             []metav1.PartialObjectMetadata `json:"items"`
		ColumnDefinitions []metav1.TableColumnDefinition `json:"columnDefinitions"`
		Rows              []struct {
			Cells []any `json:"cells"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	s := shape{Kind: v.Kind, APIVersion: v.APIVersion}
	if v.Items == nil && v.Rows == nil {
		s.Names, s.Labels = []string{v.Metadata.Name}, []map[string]string{v.Metadata.Labels}
	}
	for _, it := range v.Items {
		s.Names = append(s.Names, it.Name)
		s.Labels = append(s.Labels, it.Labels)
	}
	for _, d := range v.ColumnDefinitions {
		s.Columns = append(s.Columns, d.Name+"/"+d.Type+"/"+d.Description)
	}
	for _, r := range v.Rows {
		s.Cells = append(s.Cells, r.Cells[:2])
	}
	return s
}

// watchesOpen returns the watches of namespaces and nodes that the API
// server has open (apiserver_longrunning_requests, verb WATCH).
func watchesOpen(t *testing.T, cp *kubetest.ControlPlane) map[string]float64 {
	t.Helper()
	families := apiserverMetrics(t, cp)
	open := map[string]float64{}
	for _, m := range families["apiserver_longrunning_requests"].GetMetric() {
		l := labelsOf(m)
		if l["verb"] == "WATCH" && l["subresource"] == "" && (l["resource"] == "namespaces" || l["resource"] == "nodes") {
			open[l["resource"]] += m.GetGauge().GetValue()
		}
	}
	return open
}

// apiserverMetrics scrapes the API server's own metrics, as its admin.
func apiserverMetrics(t *testing.T, cp *kubetest.ControlPlane) map[string]*dto.MetricFamily {
	t.Helper()
	client, err := rest.HTTPClientFor(cp.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	return scrapeMetrics(t, client, "https://"+cp.Host()+"/metrics")
}

// counted returns the sum of the metric name of reg whose label key is
// value.
func counted(t *testing.T, reg *prometheus.Registry, name, key, value string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if labelsOf(m)[key] != value {
				continue
			}
			switch {
			case m.Counter != nil:
				sum += m.GetCounter().GetValue()
			case m.Gauge != nil:
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

func scrapeMetrics(t *testing.T, c *http.Client, url string) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		t.Fatal(err)
	}
	return families
}

func labelsOf(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}
