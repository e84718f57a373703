package apiserver

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/podtypes"
)

func TestBoundedTransport(t *testing.T) {
	const limit = 100
	tests := []struct {
		name    string
		query   string
		size    int
		chunked bool // No Content-Length: the body is cut while read.
		wantErr bool
	}{
		{name: "list under the bound", size: limit},
		{name: "list over the bound", size: limit + 1, wantErr: true},
		{name: "chunked list over the bound", size: limit + 1, chunked: true, wantErr: true},
		{name: "chunked list at the bound", size: limit, chunked: true},
		{name: "watch is not bounded", query: "?watch=true", size: 10 * limit, chunked: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if tt.chunked {
					w.(http.Flusher).Flush()
				}
				_, _ = io.WriteString(w, strings.Repeat("x", tt.size))
			}))
			defer srv.Close()
			client := &http.Client{Transport: &boundedTransport{next: http.DefaultTransport, max: limit}}
			var body []byte
			resp, err := client.Get(srv.URL + "/api/v1/pods" + tt.query)
			if err == nil {
				body, err = io.ReadAll(resp.Body)
				_ = resp.Body.Close()
			}
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, want error %v", err, tt.wantErr)
			}
			if !tt.wantErr && len(body) != tt.size {
				t.Errorf("read %d bytes, want %d", len(body), tt.size)
			}
		})
	}
}

func TestServedPod(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		wantUID     string
		wantKept    string // the API server's UID kept in podtypes.MirrorPodUIDAnnotation
	}{
		{name: "pod", wantUID: "api-uid"},
		{name: "mirror pod", annotations: map[string]string{MirrorAnnotation: "static-uid"}, wantUID: "static-uid", wantKept: "api-uid"},
		{name: "empty mirror annotation", annotations: map[string]string{MirrorAnnotation: ""}, wantUID: "api-uid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "api-uid", Annotations: tt.annotations,
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}}}
			got := servedPod(servedPod(pod)) // Idempotent.
			if string(got.UID) != tt.wantUID || got.ManagedFields != nil {
				t.Errorf("servedPod: UID %q with %d managed fields, want %q without", got.UID, len(got.ManagedFields), tt.wantUID)
			}
			if kept := got.Annotations[podtypes.MirrorPodUIDAnnotation]; kept != tt.wantKept {
				t.Errorf("servedPod kept the API server's UID %q, want %q", kept, tt.wantKept)
			}
		})
	}
}
