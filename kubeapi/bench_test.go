package kubeapi_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

// discard is a ResponseWriter that keeps nothing.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

// BenchmarkList measures a list of the node's 110 pods (the kubelet's
// default maximum) answered by the handler, spliced from cached encodings,
// against the baseline of encoding the same PodList with apimachinery's
// serializer for each request, as a server holding decoded pods does
// (kube-apiserver's watch cache encodes each list it answers).
func BenchmarkList(b *testing.B) {
	var pods []*corev1.Pod
	list := &corev1.PodList{}
	for i := range 110 {
		p := pod("default", fmt.Sprintf("web-%03d", i), i)
		pods = append(pods, p)
		list.Items = append(list.Items, *p)
	}
	st := newStore(pods...)
	h := handler(st)
	for _, ct := range contentTypes {
		b.Run("kubeapi/"+ct.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3D"+node, nil)
			req.Header.Set("Accept", ct.contentType)
			w := &discard{h: http.Header{}}
			h.ServeHTTP(w, req)
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, req)
			}
		})
		b.Run("serializer/"+ct.name, func(b *testing.B) {
			info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), ct.contentType)
			enc := scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
			b.ReportAllocs()
			for b.Loop() {
				if err := enc.Encode(list, io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkListForms measures a list of the node's 110 pods in the forms
// unchanged clients ask for: metadata only (client-go's metadata informer,
// JSON and protobuf), spliced from cached encodings like a list of pods, and
// kubectl's Table, encoded for each answer (its ages are the answer's) from
// cached rows.
func BenchmarkListForms(b *testing.B) {
	var pods []*corev1.Pod
	for i := range 110 {
		pods = append(pods, pod("default", fmt.Sprintf("web-%03d", i), i))
	}
	h := handler(newStore(pods...))
	for _, c := range []struct{ name, accept string }{
		{"metadata/json", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"},
		{"metadata/protobuf", "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"},
		{"table", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"},
	} {
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3D"+node, nil)
			req.Header.Set("Accept", c.accept)
			w := &discard{h: http.Header{}}
			h.ServeHTTP(w, req)
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, req)
			}
		})
	}
}
