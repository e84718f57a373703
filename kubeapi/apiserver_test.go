package kubeapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/podsapi/podsapi/source/apiserver"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/kubetest"
	"github.com/podsapi/podsapi/test/podstest"
)

// apiPod returns a pod to create on the API server, on node.
func apiPod(ns, name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
}

// normalized returns the pods of an informer's cache as the two servers
// must agree on them: without their resourceVersions (podsapi's are its
// own) and managed fields (the API server source drops them).
func normalized(idx cache.Indexer) map[string]*corev1.Pod {
	out := cached(idx)
	for _, p := range out {
		p.ResourceVersion = ""
		p.ManagedFields = nil
	}
	return out
}

// until returns the lines the recorder gets up to and including last.
func (r recorder) until(t *testing.T, last string) []string {
	t.Helper()
	deadline, stop := podstest.NearDeadline(t)
	defer stop()
	var got []string
	for {
		select {
		case l := <-r:
			got = append(got, l)
			if l == last {
				return got
			}
		case <-deadline:
			t.Fatalf("informer got %q, want them to end with %q", got, last)
		}
	}
}

// rawGet sends a GET of target with cfg's credentials and returns the
// status code and the Status of the body.
func rawGet(t *testing.T, cfg *rest.Config, target string) (int, metav1.Status) {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Get(cfg.Host + target)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var st metav1.Status
	_ = json.Unmarshal(body, &st)
	return resp.StatusCode, st
}

// TestAPIServerAgrees runs the same requests against a real kube-apiserver
// (v1.37.2 on etcd) and against the handler, fed by podsapi's API-server
// source from it, and checks their answers agree: the same pods in lists and
// in informers' caches through the same changes (but for resourceVersions
// and managed fields), the same events, the same codes and reasons for bad
// requests.
func TestAPIServerAgrees(t *testing.T) {
	cp := kubetest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := cp.Admin.CoreV1()
	if _, err := admin.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A mirror pod, as a kubelet creates one for a static pod: podsapi's
	// gRPC API serves it under the static pod's UID, the Kubernetes API
	// under its own.
	mirror := apiPod("default", "static-1-"+node, node)
	mirror.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "0a1b2c3d-static"}
	for _, p := range []*corev1.Pod{apiPod("default", "web-1", node), apiPod("team-a", "dns-1", node), apiPod("default", "far-1", "node-2"), mirror} {
		if _, err := admin.Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	st := store.New()
	src := apiserver.New(node, apiserver.WithKubeconfig(cp.Kubeconfig(t, kubetest.AdminUser, cp.Host())))
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, st) }()
	defer func() {
		cancel()
		<-done
	}()
	deadline, stop := podstest.NearDeadline(t)
	defer stop()
	select {
	case <-st.SyncedC():
	case <-deadline:
		t.Fatal("the API server source did not sync")
	}
	s := serve(t, handler(st))
	local := s.clientset(t, "application/vnd.kubernetes.protobuf")

	// An empty list is written alike, but for its resourceVersion.
	t.Run("empty list", func(t *testing.T) {
		const target = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1&labelSelector=none%3Dnone"
		rv := regexp.MustCompile(`"resourceVersion":"[^"]*"`)
		bodies := map[string]string{}
		for name, cfg := range map[string]*rest.Config{"API server": cp.AdminConfig, "podsapi": s.config("")} {
			client, err := rest.HTTPClientFor(cfg)
			if err != nil {
				t.Fatal(err)
			}
			req, err := http.NewRequest(http.MethodGet, cfg.Host+target, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Accept", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%s: %d %v", name, resp.StatusCode, err)
			}
			bodies[name] = rv.ReplaceAllString(string(body), `"resourceVersion":"RV"`)
		}
		if bodies["API server"] != bodies["podsapi"] {
			t.Errorf("empty lists differ:\nAPI server %q\npodsapi    %q", bodies["API server"], bodies["podsapi"])
		}
	})

	t.Run("errors", func(t *testing.T) {
		const list = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1"
		for _, target := range []string{
			list + "&labelSelector=a+in+(",
			list + ",spec.foo%3Dx",
			"/api/v1/namespaces/default/pods/nope",
			list + "&resourceVersion=1&resourceVersionMatch=Newest",
			list + "&resourceVersionMatch=Exact",
			list + "&sendInitialEvents=true",
			list + "&limit=1&continue=%25%25",
		} {
			code, want := rawGet(t, cp.AdminConfig, target)
			got, gotStatus := rawGet(t, s.config(""), target)
			if code != got || want.Reason != gotStatus.Reason || want.Code != gotStatus.Code || want.Message != gotStatus.Message {
				t.Errorf("%s: API server %d %s %q, podsapi %d %s %q", target, code, want.Reason, want.Message, got, gotStatus.Reason, gotStatus.Message)
			} else {
				t.Logf("%s: both %d %s; API server %q, podsapi %q", target, code, want.Reason, want.Message, gotStatus.Message)
			}
		}
	})

	direct, through := make(recorder, 100), make(recorder, 100)
	idxDirect := startInformer(t, cp.Admin, direct)
	idxThrough := startInformer(t, local, through)
	direct.expect(t, "ADDED default/web-1", "ADDED team-a/dns-1", "ADDED default/static-1-node-1")
	through.expect(t, "ADDED default/web-1", "ADDED team-a/dns-1", "ADDED default/static-1-node-1")
	if _, pods := st.List(); !slices.ContainsFunc(pods, func(p *store.Pod) bool { return p.UID == "0a1b2c3d-static" }) {
		t.Error("the store does not hold the mirror pod under its static UID")
	}
	agree := func(what string) {
		t.Helper()
		want := normalized(idxDirect)
		deadline, stop := podstest.NearDeadline(t)
		defer stop()
		for !apiequality.Semantic.DeepEqual(normalized(idxThrough), want) {
			select {
			case <-through:
			case <-deadline:
				t.Fatalf("%s: the caches differ (-podsapi +API server):\n%s", what, diff.Diff(normalized(idxThrough), want))
			}
		}
	}
	agree("initial")

	// Watches whose selectors pods leave and enter, on both servers, from
	// the resourceVersion of a list of each.
	type selWatch struct {
		name, fields, labels string
		w                    map[string]watch.Interface
	}
	selWatches := []*selWatch{
		{name: "phase", fields: pinned + ",status.phase=Pending"},
		{name: "labels", fields: pinned, labels: "!version"},
	}
	for _, sw := range selWatches {
		sw.w = map[string]watch.Interface{}
		for name, cs := range map[string]kubernetes.Interface{"API server": cp.Admin, "podsapi": local} {
			opts := metav1.ListOptions{FieldSelector: sw.fields, LabelSelector: sw.labels}
			l, err := cs.CoreV1().Pods("").List(ctx, opts)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			opts.ResourceVersion = l.ResourceVersion
			w, err := cs.CoreV1().Pods("").Watch(ctx, opts)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			defer w.Stop()
			sw.w[name] = w
		}
	}

	web1, err := admin.Pods("default").Get(ctx, "web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	web1.Labels["version"] = "2"
	if _, err := admin.Pods("default").Update(ctx, web1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Pods("default").Create(ctx, apiPod("default", "web-2", node), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Pods("default").Create(ctx, apiPod("default", "far-2", "node-2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A pod that has ended is deleted at once (one bound to a node waits
	// for its kubelet otherwise).
	dns1, err := admin.Pods("team-a").Get(ctx, "dns-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dns1.Status.Phase = corev1.PodSucceeded
	if _, err := admin.Pods("team-a").UpdateStatus(ctx, dns1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	changes := []string{"MODIFIED default/web-1", "ADDED default/web-2", "MODIFIED team-a/dns-1"}
	direct.expect(t, changes...)
	through.expect(t, changes...)
	if err := admin.Pods("team-a").Delete(ctx, "dns-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server may mark the pod deleted before it removes it: both
	// informers must see the same events up to its deletion.
	if d, th := direct.until(t, "DELETED team-a/dns-1"), through.until(t, "DELETED team-a/dns-1"); !slices.Equal(d, th) {
		t.Fatalf("events: API server %q, podsapi %q", d, th)
	}
	agree("after changes")

	// The selector watches saw the same events on both servers, up to the
	// deletion (phase: dns-1 leaving Pending; labels: its removal).
	for _, sw := range selWatches {
		seen := map[string][]string{}
		for name, w := range sw.w {
			for {
				ev := next(t, w)
				p := ev.Object.(*corev1.Pod)
				seen[name] = append(seen[name], string(ev.Type)+" "+p.Namespace+"/"+p.Name)
				if ev.Type == watch.Deleted && p.Name == "dns-1" {
					break
				}
			}
		}
		if !slices.Equal(seen["API server"], seen["podsapi"]) {
			t.Errorf("%s watch: API server %q, podsapi %q", sw.name, seen["API server"], seen["podsapi"])
		} else {
			t.Logf("%s watch: both %q", sw.name, seen["podsapi"])
		}
	}

	// A list through podsapi holds the pods of the API server's list.
	want, err := admin.Pods("").List(ctx, metav1.ListOptions{FieldSelector: pinned})
	if err != nil {
		t.Fatal(err)
	}
	got, err := local.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: pinned})
	if err != nil {
		t.Fatal(err)
	}
	names := func(l *corev1.PodList) []string {
		var out []string
		for _, p := range l.Items {
			out = append(out, p.Namespace+"/"+p.Name+"/"+string(p.UID))
		}
		slices.Sort(out)
		return out
	}
	if !slices.Equal(names(got), names(want)) {
		t.Fatalf("podsapi listed %v, the API server %v", names(got), names(want))
	}
	// A watch from a revision the server no longer holds: for the API
	// server, one before etcd's compaction, once its watch cache (rebuilt
	// by a restart) no longer holds it either; for podsapi, another
	// podsapi's.
	t.Run("too old", func(t *testing.T) {
		cp.CompactEtcd(t)
		cp.StopAPIServer(t)
		cp.StartAPIServer(t)
		for name, cs := range map[string]kubernetes.Interface{"API server": cp.Admin, "podsapi": local} {
			rv := "1"
			if name == "podsapi" {
				rv = store.New().Revision(1)
			}
			w, err := cs.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{FieldSelector: pinned, ResourceVersion: rv})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			ev := next(t, w)
			w.Stop()
			status, ok := ev.Object.(*metav1.Status)
			if ev.Type != watch.Error || !ok || status.Code != 410 || status.Reason != metav1.StatusReasonExpired {
				t.Errorf("%s: got %s %+v, want ERROR 410 Expired", name, ev.Type, ev.Object)
			}
		}
	})
}
