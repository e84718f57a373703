package kubeapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/podsapi/podsapi/kubeapi"
	"github.com/podsapi/podsapi/source/apiserver"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/kubetest"
	"github.com/podsapi/podsapi/test/podstest"
)

// rawAnswer is an answer to a GET: its status code, Content-Type and body.
type rawAnswer struct {
	code        int
	contentType string
	body        []byte
}

// rawAccept sends a GET of target with cfg's credentials and Accept
// header accept.
func rawAccept(t *testing.T, cfg *rest.Config, target, accept string) rawAnswer {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, cfg.Host+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return rawAnswer{code: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: body}
}

// comparable returns a JSON body as the two servers must agree on it:
// without managed fields (podsapi's API server source drops them), with
// every resourceVersion "RV" (podsapi's are its own) and every Table's AGE
// cell "AGE" (the time of the answer; the fifth of the pod table).
func comparable(t *testing.T, body []byte) any {
	t.Helper()
	return comparableAt(t, body, 4)
}

// comparableAt is comparable for a table whose cells at the indices ages
// depend on the time of the answer.
func comparableAt(t *testing.T, body []byte, ages ...int) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			delete(v, "managedFields")
			if _, ok := v["resourceVersion"]; ok {
				v["resourceVersion"] = "RV"
			}
			if cells, ok := v["cells"].([]any); ok {
				for _, i := range ages {
					if i < len(cells) {
						cells[i] = "AGE"
					}
				}
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(v)
	return v
}

// protobufAsJSON decodes a protobuf body of meta.k8s.io into into and
// returns it as JSON.
func protobufAsJSON(t *testing.T, body []byte, into runtime.Object) []byte {
	t.Helper()
	return decodedAsJSON(t, protobuf.NewSerializer(metainternalversionscheme.Scheme, metainternalversionscheme.Scheme), body, into)
}

// decodedAsJSON decodes body with d (into into, or nil for the type its
// kind names) and returns it as JSON.
func decodedAsJSON(t *testing.T, d runtime.Decoder, body []byte, into runtime.Object) []byte {
	t.Helper()
	obj, _, err := d.Decode(body, nil, into)
	if err != nil {
		t.Fatalf("decode protobuf: %v", err)
	}
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAPIServerForms asks a real kube-apiserver (v1.37.2 on etcd) and the
// handler, fed by podsapi's API-server source from it, for the forms that
// unchanged clients ask for, and checks they agree: PartialObjectMetadata
// and PartialObjectMetadataList (JSON and protobuf, meta.k8s.io v1 and
// v1beta1), Tables (includeObject), their 406s and 400s, pretty, and the
// answers to a resourceVersion that is not one; then that an unchanged
// client-go metadata informer syncs through the handler, receives every
// change on one watch without error, and that kubectl prints the same
// default and wide tables through the handler as against the API server.
func TestAPIServerForms(t *testing.T) {
	cp := kubetest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := cp.Admin.CoreV1()
	gated := apiPod("default", "gated-1", node)
	gated.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/ready"}}
	for _, p := range []*corev1.Pod{apiPod("default", "web-1", node), gated, apiPod("default", "done-1", node), apiPod("default", "far-1", "node-2")} {
		if _, err := admin.Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A pod that ran: its table row has READY, STATUS, RESTARTS, IP and a
	// Completed condition of its own.
	done, err := admin.Pods("default").Get(ctx, "done-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done.Status = corev1.PodStatus{
		Phase:  corev1.PodSucceeded,
		PodIPs: []corev1.PodIP{{IP: "10.1.0.7"}}, PodIP: "10.1.0.7",
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "app", Image: "registry.k8s.io/pause:3.10", RestartCount: 2,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}},
		}},
	}
	if _, err := admin.Pods("default").UpdateStatus(ctx, done, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	st := store.New()
	src := apiserver.New(node, apiserver.WithKubeconfig(cp.Kubeconfig(t, kubetest.AdminUser, cp.Host())))
	srcDone := make(chan error, 1)
	go func() { srcDone <- src.Run(ctx, st) }()
	defer func() {
		cancel()
		<-srcDone
	}()
	deadline, stop := podstest.NearDeadline(t)
	defer stop()
	select {
	case <-st.SyncedC():
	case <-deadline:
		t.Fatal("the API server source did not sync")
	}
	// The store holds done-1's status before the cases run.
	_, wt := st.Watch(1024, nil)
	defer wt.Stop()
	for {
		_, pods := st.List()
		ok := false
		for _, p := range pods {
			pod := &corev1.Pod{}
			if p.Name == "done-1" && pod.Unmarshal(p.Raw()) == nil && pod.Status.Phase == corev1.PodSucceeded {
				ok = true
			}
		}
		if ok {
			break
		}
		select {
		case <-wt.Ready():
			wt.Take(nil)
		case <-deadline:
			t.Fatal("the store did not get done-1's status")
		}
	}
	s := serve(t, handler(st, kubeapi.WithDiscovery()))
	servers := map[string]*rest.Config{"API server": cp.AdminConfig, "podsapi": s.config("")}

	const list = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1"
	const get = "/api/v1/namespaces/default/pods/done-1"
	const (
		pomJSON       = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
		pomListJSON   = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
		pomListBeta   = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1"
		pomProto      = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
		pomListProto  = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
		pomListPBeta  = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1"
		tableJSON     = "application/json;as=Table;g=meta.k8s.io;v=v1"
		tableBeta     = "application/json;as=Table;g=meta.k8s.io;v=v1beta1"
		tableProto    = "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1"
		kubectlAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
	)
	for _, c := range []struct {
		name, target, accept string
		// into decodes a protobuf body; nil for JSON.
		into func() runtime.Object
		// codeOnly compares only the status codes (podsapi's 406 names
		// only the media types it serves).
		codeOnly bool
		// exact compares the bodies byte for byte.
		exact bool
	}{
		{name: "metadata list", target: list, accept: pomListJSON},
		{name: "metadata list v1beta1", target: list, accept: pomListBeta},
		{name: "metadata list protobuf", target: list, accept: pomListProto + ",application/json", into: func() runtime.Object { return &metav1.PartialObjectMetadataList{} }},
		{name: "metadata list protobuf v1beta1", target: list, accept: pomListPBeta, into: func() runtime.Object { return &metav1.PartialObjectMetadataList{} }},
		{name: "metadata get", target: get, accept: pomJSON},
		{name: "metadata get protobuf", target: get, accept: pomProto, into: func() runtime.Object { return &metav1.PartialObjectMetadata{} }},
		{name: "metadata of a list", target: list, accept: pomJSON, exact: true},
		{name: "metadata list of a get", target: get, accept: pomListJSON, exact: true},
		{name: "table list", target: list, accept: kubectlAccept},
		{name: "table list v1beta1", target: list, accept: tableBeta},
		{name: "table list includeObject=None", target: list + "&includeObject=None", accept: tableJSON},
		{name: "table list includeObject=Object", target: list + "&includeObject=Object", accept: tableJSON},
		{name: "table get", target: get, accept: tableJSON},
		{name: "table includeObject=Bad", target: list + "&includeObject=Bad", accept: tableJSON, exact: true},
		{name: "table protobuf", target: get, accept: tableProto, codeOnly: true},
		{name: "unknown as", target: get, accept: "application/json;as=Foo;g=meta.k8s.io;v=v1", codeOnly: true},
		{name: "pretty list", target: list + "&pretty=true", accept: "application/json"},
		{name: "pretty error", target: list + "&pretty=true&labelSelector=a+in+(", exact: true},
		{name: "list resourceVersion=abc", target: list + "&resourceVersion=abc", exact: true},
		{name: "watch resourceVersion=abc", target: list + "&watch=1&resourceVersion=abc", exact: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			answers := map[string]rawAnswer{}
			for name, cfg := range servers {
				answers[name] = rawAccept(t, cfg, c.target, c.accept)
			}
			want, got := answers["API server"], answers["podsapi"]
			if want.code != got.code || want.contentType != got.contentType {
				t.Fatalf("API server %d %s %s\npodsapi %d %s %s", want.code, want.contentType, want.body, got.code, got.contentType, got.body)
			}
			switch {
			case c.codeOnly:
			case c.exact:
				if !bytes.Equal(want.body, got.body) {
					t.Errorf("bodies differ:\nAPI server %s\npodsapi    %s", want.body, got.body)
				}
			default:
				wb, gb := want.body, got.body
				if c.into != nil {
					wb, gb = protobufAsJSON(t, wb, c.into()), protobufAsJSON(t, gb, c.into())
				}
				if w, g := comparable(t, wb), comparable(t, gb); !reflect.DeepEqual(w, g) {
					wj, _ := json.Marshal(w)
					gj, _ := json.Marshal(g)
					t.Errorf("bodies differ (but for resourceVersions, managed fields and ages):\nAPI server %s\npodsapi    %s", wj, gj)
				}
				if strings.Contains(c.target, "pretty") && !bytes.HasPrefix(got.body, []byte("{\n  \"kind\": ")) {
					t.Errorf("podsapi's body is not indented: %.80q", got.body)
				}
			}
			t.Logf("both %d %s", got.code, got.contentType)
		})
	}

	t.Run("kubectl tables", func(t *testing.T) {
		bin := kubectl(t)
		configs := map[string]string{"API server": cp.Kubeconfig(t, kubetest.AdminUser, cp.Host()), "podsapi": s.kubeconfig(t)}
		for _, wide := range []bool{false, true} {
			outs := map[string][]string{}
			for name, kc := range configs {
				args := []string{"--kubeconfig", kc, "--cache-dir", t.TempDir(), "get", "pods", "-A", "--field-selector", pinned}
				if wide {
					args = append(args, "-o", "wide")
				}
				var stderr bytes.Buffer
				cmd := exec.Command(bin, args...)
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("%s: kubectl %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
				}
				t.Logf("%s, wide %v:\n%s", name, wide, out)
				outs[name] = withoutAge(string(out))
			}
			if !reflect.DeepEqual(outs["API server"], outs["podsapi"]) {
				t.Errorf("wide %v: kubectl printed (but for AGE)\nAPI server %q\npodsapi    %q", wide, outs["API server"], outs["podsapi"])
			}
			if !strings.Contains(outs["podsapi"][0], "READY STATUS RESTARTS") {
				t.Errorf("wide %v: kubectl's header through podsapi: %q", wide, outs["podsapi"][0])
			}
		}
	})

	// kubectl get pods -w asks for a watch of Tables: the rows it prints
	// through the handler are the API server's, the first with the header
	// (the column definitions the first Table carries), then one for a pod
	// added.
	t.Run("kubectl watch table", func(t *testing.T) {
		bin := kubectl(t)
		configs := map[string]string{"API server": cp.Kubeconfig(t, kubetest.AdminUser, cp.Host()), "podsapi": s.kubeconfig(t)}
		wctx, wcancel := context.WithCancel(ctx)
		defer wcancel()
		lines := map[string]chan string{}
		for name, kc := range configs {
			cmd := exec.CommandContext(wctx, bin, "--kubeconfig", kc, "--cache-dir", t.TempDir(), "get", "pods", "-n", "default", "-w", "--field-selector", pinned, "-o", "wide")
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				wcancel()
				_ = cmd.Wait()
			}()
			ch := make(chan string, 100)
			lines[name] = ch
			go func() {
				defer close(ch)
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					ch <- sc.Text()
				}
			}()
		}
		read := func(name string, n int) []string {
			t.Helper()
			var got []string
			for len(got) < n {
				select {
				case l, ok := <-lines[name]:
					if !ok {
						t.Fatalf("%s: kubectl get -w ended after %q", name, got)
					}
					got = append(got, l)
				case <-deadline:
					t.Fatalf("%s: kubectl get -w printed %q, want %d lines", name, got, n)
				}
			}
			return got
		}
		_, pods := st.List()
		n := 1 // the header
		for _, p := range pods {
			if p.Namespace == "default" {
				n++
			}
		}
		first := map[string][]string{}
		for name := range configs {
			first[name] = withoutAgeAt(read(name, n), 4)
		}
		if !reflect.DeepEqual(first["API server"], first["podsapi"]) {
			t.Errorf("kubectl get -w printed (but for AGE)\nAPI server %q\npodsapi    %q", first["API server"], first["podsapi"])
		}
		if _, err := admin.Pods("default").Create(ctx, apiPod("default", "web-3", node), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		added := map[string][]string{}
		for name := range configs {
			added[name] = withoutAgeAt(read(name, 1), 4)
		}
		if !reflect.DeepEqual(added["API server"], added["podsapi"]) || !strings.HasPrefix(added["podsapi"][0], "web-3 0/1 Pending") {
			t.Errorf("kubectl get -w printed for web-3 (but for AGE)\nAPI server %q\npodsapi    %q", added["API server"], added["podsapi"])
		}
		t.Logf("through podsapi: %q %q", first["podsapi"], added["podsapi"])
	})

	// A watch of PartialObjectMetadataList (a list's form): the API server
	// answers 200 and ends the stream at its first event without writing
	// it (it cannot encode the pod it falls back to); podsapi answers 406
	// at once, saying why (docs/kubeapi.md).
	t.Run("metadata list of a watch", func(t *testing.T) {
		target := list + "&watch=1&timeoutSeconds=1"
		want := rawAccept(t, cp.AdminConfig, target, pomListJSON)
		got := rawAccept(t, s.config(""), target, pomListJSON)
		if want.code != http.StatusOK || len(want.body) != 0 {
			t.Errorf("the API server answers %d %q; docs/kubeapi.md says 200 and no event", want.code, want.body)
		}
		if got.code != http.StatusNotAcceptable {
			t.Errorf("podsapi answers %d %s, want 406", got.code, got.body)
		}
	})

	t.Run("metadata informer", func(t *testing.T) {
		before := len(s.swap.exchanges())
		client, err := metadata.NewForConfig(s.config(""))
		if err != nil {
			t.Fatal(err)
		}
		factory := metadatainformer.NewFilteredSharedInformerFactory(client, 0, "", func(o *metav1.ListOptions) { o.FieldSelector = pinned })
		inf := factory.ForResource(corev1.SchemeGroupVersion.WithResource("pods")).Informer()
		var mu sync.Mutex
		var watchErrs []error
		if err := inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
			mu.Lock()
			watchErrs = append(watchErrs, err)
			mu.Unlock()
		}); err != nil {
			t.Fatal(err)
		}
		rec := make(chan string, 100)
		key := func(obj any) string {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			m := obj.(*metav1.PartialObjectMetadata)
			return m.Namespace + "/" + m.Name
		}
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { rec <- "ADDED " + key(obj) },
			UpdateFunc: func(_, obj any) { rec <- "MODIFIED " + key(obj) },
			DeleteFunc: func(obj any) { rec <- "DELETED " + key(obj) },
		}); err != nil {
			t.Fatal(err)
		}
		ictx, icancel := context.WithCancel(ctx)
		factory.Start(ictx.Done())
		defer func() {
			icancel()
			factory.Shutdown()
		}()
		if !cache.WaitForCacheSync(t.Context().Done(), inf.HasSynced) {
			t.Fatal("the metadata informer did not sync")
		}
		var initial []string
		_, held := st.List()
		for _, p := range held {
			initial = append(initial, "ADDED "+p.Namespace+"/"+p.Name)
		}
		expectSet(t, rec, initial...)
		web1, err := admin.Pods("default").Get(ctx, "web-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		web1.Labels["version"] = "2"
		if _, err := admin.Pods("default").Update(ctx, web1, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		expectSet(t, rec, "MODIFIED default/web-1")
		if _, err := admin.Pods("default").Create(ctx, apiPod("default", "web-2", node), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		expectSet(t, rec, "ADDED default/web-2")
		// done-1 has ended: the API server removes it at once.
		if err := admin.Pods("default").Delete(ctx, "done-1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		expectUntil(t, rec, "DELETED default/done-1")
		mu.Lock()
		errs := watchErrs
		mu.Unlock()
		if len(errs) > 0 {
			t.Errorf("watch errors: %v", errs)
		}
		var watches []string
		for _, ex := range s.swap.exchanges()[before:] {
			if strings.Contains(ex.query, "watch=true") {
				watches = append(watches, fmt.Sprintf("%s [%s] %d", ex.query, ex.accept, ex.code))
			}
		}
		if len(watches) != 1 {
			t.Errorf("the metadata informer made %d watches, want 1: %q", len(watches), watches)
		}
	})

}

// withoutAge returns kubectl's table out as lines of fields, without the
// AGE column (the sixth of get -A).
func withoutAge(out string) []string {
	return withoutAgeAt(strings.Split(strings.TrimSpace(out), "\n"), 5)
}

// withoutAgeAt returns the lines of a kubectl table as fields, without the
// field at index age (AGE).
func withoutAgeAt(lines []string, age int) []string {
	var out []string
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) > age {
			f = append(f[:age:age], f[age+1:]...)
		}
		out = append(out, strings.Join(f, " "))
	}
	return out
}

// expectSet waits for the events want, in any order.
func expectSet(t *testing.T, rec chan string, want ...string) {
	t.Helper()
	deadline, stop := podstest.NearDeadline(t)
	defer stop()
	left := map[string]bool{}
	for _, w := range want {
		left[w] = true
	}
	var got []string
	for len(left) > 0 {
		select {
		case l := <-rec:
			got = append(got, l)
			if !left[l] {
				t.Fatalf("got %q, want %q", got, want)
			}
			delete(left, l)
		case <-deadline:
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}

// expectUntil waits for the event last, allowing MODIFIED events of the
// same pod before it (the API server may mark a pod deleted first).
func expectUntil(t *testing.T, rec chan string, last string) {
	t.Helper()
	deadline, stop := podstest.NearDeadline(t)
	defer stop()
	_, key, _ := strings.Cut(last, " ")
	for {
		select {
		case l := <-rec:
			if l == last {
				return
			}
			if l != "MODIFIED "+key {
				t.Fatalf("got %q, want %q", l, last)
			}
		case <-deadline:
			t.Fatalf("no %q", last)
		}
	}
}
