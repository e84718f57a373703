package kubelethttp_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsapi/podsapi/source/kubelethttp"
	"github.com/podsapi/podsapi/test/sourcetest"
)

// podList returns a valid pod list of about n bytes of JSON: one pod with
// a large annotation.
func podList(t *testing.T, n int) []byte {
	t.Helper()
	pod := sourcetest.Pod("default", "big", uidWeb, corev1.PodRunning)
	pod.Annotations = map[string]string{"big": strings.Repeat("x", n)}
	body, err := json.Marshal(corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: []corev1.Pod{*pod}})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// gzipServer serves body compressed with gzip, Content-Encoding: gzip.
func gzipServer(t *testing.T, body []byte) *httptest.Server {
	t.Helper()
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	if _, err := zw.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(zipped.Bytes())
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestBodyCapFollowsMemoryLimit: under a memory limit, the default bound of
// the body is a tenth of it (issue 25: the bound was 256 MiB, as large as
// the DaemonSet's limit), and it counts the inflated bytes of a gzip body
// (the 1 MB gzip inflating to 1 GiB). Not parallel: it sets the
// process's memory limit.
func TestBodyCapFollowsMemoryLimit(t *testing.T) {
	const limit = 60 << 20 // a tenth: 6 MiB
	tests := []struct {
		name    string
		size    int
		gzip    bool
		refused bool
	}{
		{"under the bound", 5 << 20, false, false},
		{"over the bound", 7 << 20, false, true},
		{"gzip inflating over the bound", 7 << 20, true, true},
		{"gzip inflating under the bound", 5 << 20, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prev := debug.SetMemoryLimit(limit)
			t.Cleanup(func() { debug.SetMemoryLimit(prev) })
			body := podList(t, tt.size)
			var url string
			if tt.gzip {
				url = gzipServer(t, body).URL + "/pods"
			} else {
				k := newFakeKubelet(t, "", "podlist-1.json", httptest.NewServer)
				k.set(func(k *fakeKubelet) { k.body = body })
				url = k.url()
			}
			h := start(t, kubelethttp.WithURL(url))
			debug.SetMemoryLimit(prev) // New has read it.
			if !tt.refused {
				h.rec.WaitPods(t, nil, uidWeb)
				return
			}
			h.logs.Wait(slog.LevelWarn, "kubelet unavailable: not synced yet", 1)
			if got := h.errors(t, "too_large"); got < 1 {
				t.Fatalf(`podsapi_source_errors_total{reason="too_large"} = %v, want at least 1`, got)
			}
			if s := h.rec.Snapshot(); len(s.Calls) != 0 {
				t.Fatalf("sink calls from a body over the bound:\n%s", sourcetest.FormatCalls(s.Calls))
			}
		})
	}
}
