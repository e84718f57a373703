package kubeapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

// TestCodecsAsClientGo checks that the handler's scheme, which holds only
// the types it serves, encodes them byte for byte as client-go's scheme of
// every API group (the API server's encoders) does: each answer, decoded
// and encoded again with client-go's codecs in its own media type, is the
// same bytes.
func TestCodecsAsClientGo(t *testing.T) {
	st := newStore(pod("default", "web-1", 1))
	s := serve(t, handler(st))
	for _, ct := range contentTypes {
		info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), ct.contentType)
		if !ok {
			t.Fatalf("client-go has no serializer for %s", ct.contentType)
		}
		again := func(t *testing.T, got []byte, s runtime.Serializer, into runtime.Object) {
			t.Helper()
			obj, _, err := s.Decode(got, nil, into)
			if err != nil {
				t.Fatalf("decode %q: %v", got, err)
			}
			var want bytes.Buffer
			if err := scheme.Codecs.EncoderForVersion(s, corev1.SchemeGroupVersion).Encode(obj, &want); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want.Bytes()) {
				t.Errorf("the handler's encoding\n%q\nclient-go's\n%q", got, want.Bytes())
			}
		}
		for _, tc := range []struct {
			name, path string
			code       int
			into       runtime.Object
		}{
			{"pod", "/api/v1/namespaces/default/pods/web-1", http.StatusOK, &corev1.Pod{}},
			{"status", "/api/v1/namespaces/default/pods/missing", http.StatusNotFound, &metav1.Status{}},
		} {
			t.Run(ct.name+"/"+tc.name, func(t *testing.T) {
				resp, body := s.get(t, tc.path, ct.contentType)
				if resp.StatusCode != tc.code {
					t.Fatalf("%d %s, want %d", resp.StatusCode, body, tc.code)
				}
				again(t, body, info.Serializer, tc.into)
			})
		}
		t.Run(ct.name+"/watch event", func(t *testing.T) {
			frame := firstEvent(t, s, ct.contentType)
			again(t, frame, info.StreamSerializer.Serializer, &metav1.WatchEvent{})
		})
	}
}

// firstEvent returns the first event of a watch of the node's pods in
// mediaType, unframed.
func firstEvent(t *testing.T, s *served, mediaType string) []byte {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.srv.URL+"/api/v1/pods?watch=1&resourceVersion=0&fieldSelector="+pinned, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", mediaType)
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: %d", resp.StatusCode)
	}
	if mediaType == "application/json" {
		line, err := bufio.NewReader(resp.Body).ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		return line
	}
	// Protobuf frames: a 4-byte big-endian length, then the event.
	var n uint32
	if err := binary.Read(resp.Body, binary.BigEndian, &n); err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(resp.Body, frame); err != nil {
		t.Fatal(err)
	}
	return frame
}
