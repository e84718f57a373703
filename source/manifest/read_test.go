package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadManifestFIFOSwappedAfterCheck swaps a FIFO in for a regular file
// between readManifest's checks and its open: the open does not block and
// the FIFO is rejected as not regular. (Not parallel: it sets beforeOpen.)
func TestReadManifestFIFOSwappedAfterCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.yaml")
	if err := os.WriteFile(path, []byte("a: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	beforeOpen = func(p string) {
		if err := os.Remove(p); err != nil {
			t.Error(err)
		}
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { beforeOpen = func(string) {} })
	done := make(chan error, 1)
	go func() {
		_, err := readManifest(path, DefaultMaxFileBytes)
		done <- err
	}()
	select {
	case err := <-done:
		if r, ok := errors.AsType[*rejection](err); !ok || r.reason != reasonNotRegular {
			t.Errorf("readManifest = %v, want a not_regular rejection", err)
		}
	case <-time.After(30 * time.Second): // A deadline, not a synchronisation.
		t.Error("readManifest blocked on the FIFO")
		// Unblock it: open the FIFO for writing.
		if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			_ = f.Close()
		}
		<-done
	}
}

// TestAliasBombIsCheap decodes a 900 KB anchor aliased 200 times, 180 MB
// expanded, and checks that rejecting it allocates little: the expanded
// document is never built.
func TestAliasBombIsCheap(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Pod\nmetadata:\n  name: bomb\n  annotations:\n")
	b.WriteString("    a: &a \"" + strings.Repeat("x", 900_000) + "\"\n")
	for i := range 200 {
		b.WriteString("    b" + string(rune('a'+i%26)) + strings.Repeat("z", i/26) + ": *a\n")
	}
	data := []byte(b.String())
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := decodeFile("bomb.yaml", data, "node-1", DefaultMaxFileBytes)
	runtime.ReadMemStats(&after)
	if r, ok := errors.AsType[*rejection](err); !ok || r.reason != reasonTooLarge {
		t.Fatalf("decodeFile = %v, want a too_large rejection", err)
	}
	// The file itself is 0.9 MB; the old decoder allocated over 1 GB.
	const budget = 32 << 20
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > budget {
		t.Errorf("rejecting the alias bomb allocated %d MiB, want at most %d MiB", alloc>>20, budget>>20)
	}
}
