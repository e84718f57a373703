package service

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/podsapi/podsapi/fieldmask"
	"github.com/podsapi/podsapi/store"
)

func mustParse(t *testing.T, paths ...string) *fieldmask.Mask {
	t.Helper()
	m, err := fieldmask.Parse(paths...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestProjectionsShared checks that calls and watches with the same mask
// share one projection, that a watch's differs from a call's (it is widened
// to the identity paths), and that the cache stays bounded.
func TestProjectionsShared(t *testing.T) {
	h := newHandler(store.New(), nil)
	a, b := mustParse(t, "status.podIP"), mustParse(t, "status.podIP")
	if h.projection(a) != h.projection(b) {
		t.Error("two calls with the same mask built two projections")
	}
	if h.projection(nil) != h.projection(nil) {
		t.Error("two calls without a mask built two projections")
	}
	wa, err := h.watchProjection(a)
	if err != nil {
		t.Fatal(err)
	}
	wb, err := h.watchProjection(b)
	if err != nil {
		t.Fatal(err)
	}
	if wa != wb {
		t.Error("two watches with the same mask built two projections")
	}
	if wa == h.projection(a) {
		t.Error("a watch shares the projection of a call: its mask must include the identity paths")
	}
	if got, want := wa.mask.Key(), "metadata.name,metadata.namespace,metadata.uid,status.podIP"; got != want {
		t.Errorf("watch mask %q, want %q", got, want)
	}
	if h.projection(mustParse(t, "status.phase")) == h.projection(a) {
		t.Error("two masks share a projection")
	}
	// Distinct masks: the subsets of these paths.
	paths := []string{"metadata.name", "metadata.labels", "metadata.annotations", "spec.nodeName",
		"spec.containers", "status.phase", "status.podIP", "status.hostIP", "status.conditions"}
	for i := 1; i <= 2*maskCacheSize; i++ {
		var sub []string
		for j, p := range paths {
			if i&(1<<j) != 0 {
				sub = append(sub, p)
			}
		}
		h.projection(mustParse(t, sub...))
	}
	if n := h.projections.c.Len(); n != maskCacheSize {
		t.Errorf("%d projections kept, want %d", n, maskCacheSize)
	}
}

// TestMaskCacheKeyBound checks that values of keys longer than maxCachedKey
// are built and not kept, and that failures are not kept.
func TestMaskCacheKeyBound(t *testing.T) {
	c := newMaskCache()
	builds := 0
	build := func() (int, error) { builds++; return builds, nil }
	for _, key := range []string{strings.Repeat("x", maxCachedKey), strings.Repeat("x", maxCachedKey)} {
		if v, _ := get(c, key, build); v != 1 {
			t.Errorf("key of %d bytes: value %d, want the first one built", len(key), v)
		}
	}
	long := strings.Repeat("y", maxCachedKey+1)
	get(c, long, build)
	get(c, long, build)
	if builds != 3 || c.c.Len() != 1 {
		t.Errorf("%d builds, %d kept; want 3 builds (a long key is built each time) and 1 kept", builds, c.c.Len())
	}
	fail := func() (int, error) { builds++; return 0, fmt.Errorf("bad") }
	get(c, "bad", fail)
	get(c, "bad", fail)
	if builds != 5 || c.c.Len() != 1 {
		t.Errorf("%d builds, %d kept; want a failure built each time and never kept", builds, c.c.Len())
	}
}

// TestMasksParsedOnce checks that the interceptor parses a header once,
// keeps no error, and tells apart headers and values that differ only in
// where they split.
func TestMasksParsedOnce(t *testing.T) {
	f := FieldMasks().(fieldMask)
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Add(kv[i], kv[i+1])
		}
		return h
	}
	m1, err := f.parse(hdr(fieldmask.Header, "status.podIP,metadata.name"))
	if err != nil {
		t.Fatal(err)
	}
	m2, _ := f.parse(hdr(fieldmask.Header, "status.podIP,metadata.name"))
	if m1 != m2 {
		t.Error("the same header was parsed twice")
	}
	if m, err := f.parse(http.Header{}); m != nil || err != nil {
		t.Errorf("no header: %v, %v; want the whole pod", m, err)
	}
	for range 2 {
		if _, err := f.parse(hdr(fieldmask.Header, "status.nope")); err == nil {
			t.Fatal("an invalid mask was accepted")
		}
	}
	if f.masks.c.Len() != 1 {
		t.Errorf("%d masks kept, want 1 (errors are not kept)", f.masks.c.Len())
	}
	// The same text split into two values, or sent in the other header,
	// is another key.
	two, err := f.parse(hdr(fieldmask.Header, "status.podIP", fieldmask.Header, "metadata.name"))
	if err != nil {
		t.Fatal(err)
	}
	if two == m1 || two.Key() != m1.Key() {
		t.Errorf("two values: %p %q, one value: %p %q; want equal masks from two keys", two, two.Key(), m1, m1.Key())
	}
}
