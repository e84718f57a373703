package kubeapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
)

// TestForms asks the handler for each form by its Accept header and checks
// the kind, group version and Content-Type of the answer, or its error.
func TestForms(t *testing.T) {
	st := newStore(pod("default", "web-1", 1), pod("default", "web-2", 2))
	s := serve(t, handler(st))
	const list = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1"
	const get = "/api/v1/namespaces/default/pods/web-1"
	for _, c := range []struct {
		name, target, accept string
		code                 int
		contentType          string
		// kind is "apiVersion kind" of a JSON answer, or a prefix of a
		// protobuf one's.
		kind string
	}{
		{"plain list", list, "", 200, "application/json", "v1 PodList"},
		{"wildcard", list, "*/*", 200, "application/json", "v1 PodList"},
		{"metadata list", list, "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", 200, "application/json", "meta.k8s.io/v1 PartialObjectMetadataList"},
		{"metadata list v1beta1", list, "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1", 200, "application/json", "meta.k8s.io/v1beta1 PartialObjectMetadataList"},
		{"metadata list protobuf", list, "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", 200, "application/vnd.kubernetes.protobuf", "meta.k8s.io/v1"},
		{"metadata get", get, "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1", 200, "application/json", "meta.k8s.io/v1 PartialObjectMetadata"},
		{"metadata of a list", list, "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1", 406, "application/json", "v1 Status"},
		{"metadata list of a get", get, "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", 406, "application/json", "v1 Status"},
		{"metadata list of a watch", list + "&watch=1", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", 406, "application/json", "v1 Status"},
		{"table list", list, "application/json;as=Table;g=meta.k8s.io;v=v1", 200, "application/json", "meta.k8s.io/v1 Table"},
		{"table get v1beta1", get, "application/json;as=Table;g=meta.k8s.io;v=v1beta1", 200, "application/json", "meta.k8s.io/v1beta1 Table"},
		{"table protobuf", get, "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1", 406, "application/json", "v1 Status"},
		{"table protobuf, JSON fallback", get, "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1,application/json", 200, "application/json", "v1 Pod"},
		{"unknown kind", get, "application/json;as=Foo;g=meta.k8s.io;v=v1", 406, "application/json", "v1 Status"},
		{"unknown version", get, "application/json;as=Table;g=meta.k8s.io;v=v2", 406, "application/json", "v1 Status"},
		{"unknown group", get, "application/json;as=Table;g=example.com;v=v1", 406, "application/json", "v1 Status"},
		{"bad includeObject", list + "&includeObject=All", "application/json;as=Table;g=meta.k8s.io;v=v1", 400, "application/json", "v1 Status"},
		{"list resourceVersion=abc", list + "&resourceVersion=abc", "", 400, "application/json", "v1 Status"},
		{"watch resourceVersion=abc", list + "&watch=1&resourceVersion=abc", "", 500, "application/json", "v1 Status"},
		{"list API server's resourceVersion", list + "&resourceVersion=12345", "", 200, "application/json", "v1 PodList"},
		{"list podsapi's resourceVersion", list + "&resourceVersion=" + st.Revision(1), "", 200, "application/json", "v1 PodList"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := s.get(t, c.target, c.accept)
			if resp.StatusCode != c.code || resp.Header.Get("Content-Type") != c.contentType {
				t.Fatalf("%d %s %s, want %d %s", resp.StatusCode, resp.Header.Get("Content-Type"), body, c.code, c.contentType)
			}
			if strings.HasPrefix(c.contentType, "application/json") {
				var tm metav1.TypeMeta
				if err := json.Unmarshal(body, &tm); err != nil {
					t.Fatal(err)
				}
				if got := tm.APIVersion + " " + tm.Kind; got != c.kind {
					t.Fatalf("%s, want %s", got, c.kind)
				}
			} else if !bytes.Contains(body[:min(len(body), 64)], []byte(c.kind)) {
				t.Fatalf("%q does not name %s", body[:min(len(body), 64)], c.kind)
			}
		})
	}
}

// TestPretty checks that pretty=true indents JSON lists, objects and
// errors, leaves protobuf and watches as they are, and that a body indented
// holds what the compact one holds.
func TestPretty(t *testing.T) {
	st := newStore(pod("default", "web-1", 1))
	s := serve(t, handler(st))
	const list = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1"
	for _, target := range []string{list, "/api/v1/namespaces/default/pods/web-1", list + "&labelSelector=a+in+("} {
		_, compact := s.get(t, target, "")
		_, pretty := s.get(t, target+"&pretty=true", "")
		if strings.Contains(target, "pods/web-1") {
			_, pretty = s.get(t, target+"?pretty=true", "")
		}
		if !bytes.HasPrefix(pretty, []byte("{\n  \"kind\": ")) {
			t.Errorf("%s: not indented: %.60q", target, pretty)
		}
		var want bytes.Buffer
		if err := json.Indent(&want, bytes.TrimSpace(compact), "", "  "); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(pretty, want.Bytes()) {
			t.Errorf("%s: indented %q, want %q", target, pretty, want.Bytes())
		}
	}
	resp, body := s.get(t, list+"&pretty=true&watch=1&timeoutSeconds=1", "")
	if resp.StatusCode != 200 || bytes.Contains(body, []byte("\n  ")) {
		t.Errorf("a watch with pretty=true: %d %.60q, want compact events", resp.StatusCode, body)
	}
}

// TestMetadataEncodedOnce runs ten metadata-only watches (client-go's
// metadata client) and sees that a change reaching them all costs one
// encoding of the PartialObjectMetadata and one of its event, not one per
// watch; and that lists of metadata reuse the pods' encodings.
func TestMetadataEncodedOnce(t *testing.T) {
	st := newStore(pod("default", "web-1", 1), pod("default", "web-2", 2))
	h := handler(st)
	s := serve(t, h)
	client, err := metadata.NewForConfig(s.config(""))
	if err != nil {
		t.Fatal(err)
	}
	pods := client.Resource(corev1.SchemeGroupVersion.WithResource("pods"))
	var watches []watch.Interface
	for range 10 {
		w, err := pods.Watch(context.Background(), metav1.ListOptions{FieldSelector: pinned, ResourceVersion: st.Revision(2)})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		watches = append(watches, w)
	}
	before := h.Encodes()
	st.Upsert(pod("default", "web-3", 3))
	for _, w := range watches {
		ev := next(t, w)
		if m, ok := ev.Object.(*metav1.PartialObjectMetadata); ev.Type != watch.Added || !ok || m.Name != "web-3" {
			t.Fatalf("got %s %T", ev.Type, ev.Object)
		}
	}
	if n := h.Encodes() - before; n != 2 {
		t.Errorf("a change to 10 metadata watches cost %d encodings, want 2 (object and event)", n)
	}
	before = h.Encodes()
	for range 5 {
		l, err := pods.List(context.Background(), metav1.ListOptions{FieldSelector: pinned})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) != 3 {
			t.Fatalf("listed %d pods' metadata, want 3", len(l.Items))
		}
	}
	if n := h.Encodes() - before; n != 3 {
		t.Errorf("5 lists of 3 pods' metadata cost %d encodings, want 3", n)
	}
}
