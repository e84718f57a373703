package kubeapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/pager"

	"github.com/podsapi/podsapi/podtypes"
	"github.com/podsapi/podsapi/store"
)

// fivePods returns a store of five pods in two namespaces.
func fivePods() *store.Store {
	var pods []*corev1.Pod
	for i := range 5 {
		pods = append(pods, pod([]string{"default", "kube-system"}[i%2], fmt.Sprintf("web-%d", i), i))
	}
	return newStore(pods...)
}

// TestPaging lists in pages with limit and continue through a typed
// clientset; a continue after the store changed is 410 Expired, on which
// client-go's pager lists again in full.
func TestPaging(t *testing.T) {
	for _, ct := range contentTypes {
		t.Run(ct.name, func(t *testing.T) {
			st := fivePods()
			cs := serve(t, handler(st)).clientset(t, ct.contentType)
			ctx := context.Background()
			var names []string
			opts := metav1.ListOptions{FieldSelector: pinned, Limit: 2}
			for page := 0; ; page++ {
				l, err := cs.CoreV1().Pods("").List(ctx, opts)
				if err != nil {
					t.Fatal(err)
				}
				if page == 0 && l.ResourceVersion != st.Revision(5) {
					t.Errorf("resourceVersion %q, want %q", l.ResourceVersion, st.Revision(5))
				}
				for _, p := range l.Items {
					names = append(names, p.Namespace+"/"+p.Name)
				}
				if l.Continue == "" {
					break
				}
				opts.Continue = l.Continue
			}
			want := "[default/web-0 default/web-2 default/web-4 kube-system/web-1 kube-system/web-3]"
			if fmt.Sprint(names) != want {
				t.Fatalf("pages listed %v, want %s", names, want)
			}

			first, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: pinned, Limit: 2})
			if err != nil {
				t.Fatal(err)
			}
			st.Upsert(pod("default", "web-9", 9))
			_, err = cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: pinned, Limit: 2, Continue: first.Continue})
			if !apierrors.IsResourceExpired(err) {
				t.Fatalf("continue after a change: %v, want 410 Expired", err)
			}
			p := pager.New(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				if o.Continue == "" {
					st.Upsert(pod("default", fmt.Sprintf("web-%d", 10+len(o.ResourceVersion)), 10)) // a change under every first page
				}
				return cs.CoreV1().Pods("").List(ctx, o)
			})
			p.PageSize = 2
			all, _, err := p.List(ctx, metav1.ListOptions{FieldSelector: pinned})
			if err != nil {
				t.Fatal(err)
			}
			if n := meta.LenList(all); n < 7 {
				t.Fatalf("the pager listed %d pods, want every pod (7 or more)", n)
			}
		})
	}
}

// TestEncodings checks the bodies the handler splices from cached
// encodings are those apimachinery's serializers write for the same
// objects, byte for byte: a list in JSON and protobuf, and the kubelet's
// /pods.
func TestEncodings(t *testing.T) {
	st := fivePods()
	s := serve(t, handler(st))
	for _, tt := range []struct{ name, target, accept string }{
		{"json list", "/api/v1/namespaces/default/pods?fieldSelector=spec.nodeName%3Dnode-1&limit=2", "application/json"},
		{"protobuf list", "/api/v1/namespaces/default/pods?fieldSelector=spec.nodeName%3Dnode-1&limit=2", "application/vnd.kubernetes.protobuf"},
		{"protobuf get", "/api/v1/namespaces/default/pods/web-2", "application/vnd.kubernetes.protobuf"},
		{"json get", "/api/v1/namespaces/default/pods/web-2", "application/json"},
		{"kubelet's /pods", "/pods", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := s.get(t, tt.target, tt.accept)
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			mediaType := resp.Header.Get("Content-Type")
			info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
			if !ok {
				t.Fatalf("Content-Type %q", mediaType)
			}
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if l, ok := obj.(*corev1.PodList); ok && tt.accept != "" {
				if len(l.Items) != 2 || l.Continue == "" || l.ResourceVersion != st.Revision(5) {
					t.Fatalf("list %d items, continue %q, resourceVersion %q", len(l.Items), l.Continue, l.ResourceVersion)
				}
			}
			var again bytes.Buffer
			if err := scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion).Encode(obj, &again); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(body, again.Bytes()) {
				t.Fatalf("body differs from the serializer's encoding:\n%q\n%q", body, again.Bytes())
			}
		})
	}
}

// TestMirrorPodUID serves a mirror pod as the API-server source stores it
// (under its static pod's UID, the API server's kept in an annotation): the
// Kubernetes API gives it its API server UID, the kubelet's /pods the static
// one, and neither shows the annotation.
func TestMirrorPodUID(t *testing.T) {
	mirror := pod("kube-system", "etcd-node-1", 1)
	mirror.UID = "static-uid"
	mirror.Annotations[corev1.MirrorPodAnnotationKey] = "static-uid"
	mirror.Annotations[podtypes.MirrorPodUIDAnnotation] = "api-uid"
	s := serve(t, handler(newStore(mirror)))
	for _, ct := range contentTypes {
		got, err := s.clientset(t, ct.contentType).CoreV1().Pods("kube-system").Get(context.Background(), "etcd-node-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, kept := got.Annotations[podtypes.MirrorPodUIDAnnotation]; got.UID != "api-uid" || kept || got.Annotations[corev1.MirrorPodAnnotationKey] != "static-uid" {
			t.Errorf("%s: UID %q, annotations %v", ct.name, got.UID, got.Annotations)
		}
	}
	_, body := s.get(t, "/pods", "")
	var l corev1.PodList
	if err := json.Unmarshal(body, &l); err != nil {
		t.Fatal(err)
	}
	if _, kept := l.Items[0].Annotations[podtypes.MirrorPodUIDAnnotation]; l.Items[0].UID != "static-uid" || kept {
		t.Errorf("/pods: UID %q, annotations %v", l.Items[0].UID, l.Items[0].Annotations)
	}
}
