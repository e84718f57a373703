package manifest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// attackEnv names the attack TestAttackMemory runs: sparse, pagemap,
// alias, or none for the baseline. The test is skipped when it is not set, because its figures are
// those of the whole process: run it alone, one attack per process.
const attackEnv = "PODSAPI_MANIFEST_ATTACK"

// TestAttackMemory measures what one hostile manifest costs the process:
// it starts a Source on a directory holding a good manifest and the attack,
// waits for the initial sync, and logs the peak RSS and the heap figures.
// Reproduce the figures of docs/reliability.md with
//
//	PODSAPI_MANIFEST_ATTACK=sparse go test -count=1 -run TestAttackMemory -v ./source/manifest
//
// and likewise with pagemap, alias and none.
func TestAttackMemory(t *testing.T) {
	attack := os.Getenv(attackEnv)
	if attack == "" {
		t.Skipf("set %s to sparse, pagemap, alias or none to measure an attack", attackEnv)
	}
	dir := t.TempDir()
	writeFile(t, dir, "good.yaml", podYAML("", "good", "", "i"))
	switch attack {
	case "none":
	case "sparse":
		path := filepath.Join(dir, "sparse.yaml")
		writeFile(t, dir, "sparse.yaml", "")
		if err := os.Truncate(path, 15<<40); err != nil {
			t.Fatal(err)
		}
	case "pagemap":
		if err := os.Symlink("/proc/self/pagemap", filepath.Join(dir, "pagemap.yaml")); err != nil {
			t.Fatal(err)
		}
	case "alias":
		writeFile(t, dir, "alias.yaml", aliasBomb(1_000_000, 200))
	default:
		t.Fatalf("%s=%q: want sparse, pagemap, alias or none", attackEnv, attack)
	}
	begin := time.Now()
	h := start(t, dir)
	took := time.Since(begin)
	h.pod("default", "good")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	t.Logf("attack %s: synced in %v; peak RSS %d MiB, heap in use %d MiB, heap sys %d MiB, total allocated %d MiB",
		attack, took.Round(time.Millisecond), ru.Maxrss>>10, ms.HeapInuse>>20, ms.HeapSys>>20, ms.TotalAlloc>>20)
}

// aliasBomb returns a Pod manifest with an annotation of size bytes that
// is aliased by n more annotations: small as a file, n times its size when
// its aliases are expanded.
func aliasBomb(size, n int) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Pod\nmetadata:\n  name: bomb\n  annotations:\n")
	b.WriteString("    a: &a \"" + strings.Repeat("x", size) + "\"\n")
	for i := range n {
		fmt.Fprintf(&b, "    b%d: *a\n", i)
	}
	b.WriteString("spec:\n  containers:\n  - name: main\n    image: i\n")
	return b.String()
}
