package kubelethttp

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// TestDecodeStreamMatchesUnmarshal: the pod lists of testdata decode, one
// pod at a time, to what a whole-body decode gives; hostile shapes are
// refused.
func TestDecodeStreamMatchesUnmarshal(t *testing.T) {
	files, _ := filepath.Glob("testdata/podlist-*.json")
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var want corev1.PodList
		if err := utiljson.Unmarshal(body, &want); err != nil {
			t.Fatal(err)
		}
		got, err := decodeStream(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !equality.Semantic.DeepEqual(got, want.Items) {
			t.Fatalf("%s: streamed pods differ from the whole-body decode", f)
		}
	}
	for _, tc := range []struct{ name, body string }{
		{"empty", ""},
		{"array", `[]`},
		{"wrong kind", `{"kind":"Pod","apiVersion":"v1","items":[]}`},
		{"items not an array", `{"kind":"PodList","apiVersion":"v1","items":{}}`},
		{"item not a pod", `{"kind":"PodList","apiVersion":"v1","items":[7]}`},
		{"data after the list", `{"kind":"PodList","apiVersion":"v1","items":[]} {}`},
		{"cut short", `{"kind":"PodList","apiVersion":"v1","items":[{"metadata":{"name":"a"`},
		{"unknown field of any shape", `{"kind":"PodList","apiVersion":"v1","x":[{"y":[1,{"z":null}]}],"items":[]}x`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if pods, err := decodeStream(strings.NewReader(tc.body)); err == nil {
				t.Fatalf("decoded %d pods from %q, want an error", len(pods), tc.body)
			}
		})
	}
	if pods, err := decodeStream(strings.NewReader(`{"metadata":{"resourceVersion":"1"},"x":[{"y":[1,{"z":null}]}],"kind":"PodList","apiVersion":"v1","items":null}`)); err != nil || len(pods) != 0 {
		t.Fatalf("a list with unknown fields and no items: %d pods, %v", len(pods), err)
	}
}

// TestCappedReader: a body at the cap is read whole, one byte more fails
// with errBodyTooLarge.
func TestCappedReader(t *testing.T) {
	for _, tc := range []struct {
		size int
		want error
	}{{99, nil}, {100, nil}, {101, errBodyTooLarge}} {
		r := &cappedReader{r: strings.NewReader(strings.Repeat("x", tc.size)), left: 100}
		b, err := io.ReadAll(r)
		if err != tc.want || (tc.want == nil && len(b) != tc.size) {
			t.Fatalf("%d bytes under a cap of 100: read %d, %v; want %v", tc.size, len(b), err, tc.want)
		}
	}
}

// TestDecodeStreamHoldsNoBody: decoding a list as a stream allocates less
// than reading the body whole and decoding it, the way fetch did (measured
// in the same run: the bytes each allocates to decode the same list).
func TestDecodeStreamHoldsNoBody(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"kind":"PodList","apiVersion":"v1","items":[`)
	for i := range 2000 {
		if i > 0 {
			b.WriteString(",")
		}
		// Pods of large annotations: the body is mostly strings the
		// decoded pods hold once.
		fmt.Fprintf(&b, `{"metadata":{"name":"p%d","namespace":"default","uid":"u%d","annotations":{"a":%q}}}`, i, i, strings.Repeat("x", 4<<10))
	}
	b.WriteString(`]}`)
	body := b.String()
	peak := func(decode func() ([]corev1.Pod, error)) uint64 {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		pods, err := decode()
		if err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(pods)
		return after.TotalAlloc - before.TotalAlloc
	}
	whole := peak(func() ([]corev1.Pod, error) {
		raw, err := io.ReadAll(strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		var list corev1.PodList
		err = utiljson.Unmarshal(raw, &list)
		return list.Items, err
	})
	streamed := peak(func() ([]corev1.Pod, error) { return decodeStream(strings.NewReader(body)) })
	t.Logf("body %d bytes: allocated %d read whole, %d streamed", len(body), whole, streamed)
	if streamed >= whole-uint64(len(body)) {
		t.Fatalf("streamed decode allocated %d bytes, want less than the whole-body decode (%d) less the body (%d)", streamed, whole, len(body))
	}
}
