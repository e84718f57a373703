package manifest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/podsapi/podsapi/source/manifest"
)

// TestDirectoryReplacedByFile replaces the manifest directory by a regular
// file: its pods are deleted, the source keeps running, and a directory
// put back is followed again.
func TestDirectoryReplacedByFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir() + "/manifests"
	writeFiles(t, dir, map[string]string{"a.yaml": podYAML("", "a", "", "i")})
	h := start(t, dir, manifest.WithResyncInterval(5*time.Millisecond))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.expect(del("default", "a"))
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"b.yaml": podYAML("", "b", "", "i")})
	h.expect(upsert("default", "b"))
	h.quiet()
}

// TestManyFilesAtOnce fills the directory with 5,000 manifests at once
// (more events than the kernel queues may hold): every pod arrives.
func TestManyFilesAtOnce(t *testing.T) {
	t.Parallel()
	const n = 5000
	dir := t.TempDir()
	h := start(t, dir, manifest.WithResyncInterval(50*time.Millisecond))
	staging := t.TempDir()
	for i := range n {
		name := fmt.Sprintf("p-%04d", i)
		if err := os.WriteFile(filepath.Join(staging, name+".yaml"), []byte(podYAML("", name, "", "i")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		name := fmt.Sprintf("p-%04d.yaml", i)
		if err := os.Rename(filepath.Join(staging, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for len(h.pods) < n {
		h.next()
	}
	h.quiet()
	h.checkErrors(nil)
}
