package manifest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/podsapi/podsapi/source/manifest"
)

// podWithMeta returns a Pod manifest named name with extra lines under
// metadata (each indented by two spaces already).
func podWithMeta(name string, meta ...string) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n")
	for _, m := range meta {
		b.WriteString(m)
	}
	b.WriteString("spec:\n  containers:\n  - name: main\n    image: i\n")
	return b.String()
}

// annotations returns a metadata.annotations block of one annotation "a"
// whose key and value together are size bytes.
func annotations(size int) string {
	return "  annotations:\n    a: \"" + strings.Repeat("x", size-1) + "\"\n"
}

// labels returns a metadata.labels block of n labels.
func labels(n int) string {
	var b strings.Builder
	b.WriteString("  labels:\n")
	for i := range n {
		fmt.Fprintf(&b, "    l%d: v\n", i)
	}
	return b.String()
}

// padTo pads a manifest with a trailing comment to exactly size bytes.
func padTo(t *testing.T, content string, size int) string {
	t.Helper()
	pad := size - len(content) - 2
	if pad < 0 {
		t.Fatalf("content is %d bytes, over %d", len(content), size)
	}
	return content + "#" + strings.Repeat("x", pad) + "\n"
}

// TestHostileFiles puts one hostile file next to a good one: the good
// file is served, the hostile one is rejected with its reason, counted,
// and costs at most the size cap, and the Source keeps following changes.
func TestHostileFiles(t *testing.T) {
	t.Parallel()
	const smallCap = 4096
	tests := []struct {
		name       string
		opts       []manifest.Option
		setup      func(t *testing.T, dir string)
		wantServed []string // Besides default/good.
		wantReason string   // Empty: no error.
	}{
		{
			name: "sparse file of 15 TB",
			setup: func(t *testing.T, dir string) {
				writeFile(t, dir, "sparse.yaml", "")
				if err := os.Truncate(filepath.Join(dir, "sparse.yaml"), 15<<40); err != nil {
					t.Fatal(err)
				}
			},
			wantReason: "too_large",
		},
		{
			name: "file one byte over the cap",
			opts: []manifest.Option{manifest.WithMaxFileBytes(smallCap)},
			setup: func(t *testing.T, dir string) {
				writeFile(t, dir, "big.yaml", padTo(t, podYAML("", "big", "", "i"), smallCap+1))
			},
			wantReason: "too_large",
		},
		{
			name: "file at the cap",
			opts: []manifest.Option{manifest.WithMaxFileBytes(smallCap)},
			setup: func(t *testing.T, dir string) {
				writeFile(t, dir, "big.yaml", padTo(t, podYAML("", "big", "", "i"), smallCap))
			},
			wantServed: []string{"default/big"},
		},
		{
			name: "no cap",
			opts: []manifest.Option{manifest.WithMaxFileBytes(-1)},
			setup: func(t *testing.T, dir string) {
				writeFile(t, dir, "big.yaml", padTo(t, podYAML("", "big", "", "i"), 2*manifest.DefaultMaxFileBytes))
			},
			wantServed: []string{"default/big"},
		},
		{
			name: "symbolic link to /proc/self/pagemap",
			setup: func(t *testing.T, dir string) {
				symlink(t, "/proc/self/pagemap", filepath.Join(dir, "pagemap.yaml"))
			},
			wantReason: "not_regular",
		},
		{
			name: "symbolic link to /dev/zero",
			setup: func(t *testing.T, dir string) {
				symlink(t, "/dev/zero", filepath.Join(dir, "zero.yaml"))
			},
			wantReason: "not_regular",
		},
		{
			name: "symbolic link to a regular file",
			setup: func(t *testing.T, dir string) {
				other := t.TempDir()
				writeFile(t, other, "target", podYAML("", "linked", "", "i"))
				symlink(t, filepath.Join(other, "target"), filepath.Join(dir, "linked.yaml"))
			},
			wantServed: []string{"default/linked"},
		},
		{
			name: "FIFO",
			setup: func(t *testing.T, dir string) {
				mkfifo(t, filepath.Join(dir, "fifo.yaml"))
			},
			wantReason: "not_regular",
		},
		{
			name: "annotations one byte over 256 KiB",
			setup: func(t *testing.T, dir string) {
				writeFile(t, dir, "annotated.yaml", podWithMeta("annotated", annotations(256<<10+1)))
			},
			wantReason: "invalid",
		},
		{
			name: "annotations of 256 KiB",
			setup: func(t *testing.T, dir string) {
				writeFile(t, dir, "annotated.yaml", podWithMeta("annotated", annotations(256<<10)))
			},
			wantServed: []string{"default/annotated"},
		},
		{
			name: "1025 labels",
			setup: func(t *testing.T, dir string) {
				writeFile(t, dir, "labelled.yaml", podWithMeta("labelled", labels(1025)))
			},
			wantReason: "invalid",
		},
		{
			name: "1024 labels",
			setup: func(t *testing.T, dir string) {
				writeFile(t, dir, "labelled.yaml", podWithMeta("labelled", labels(1024)))
			},
			wantServed: []string{"default/labelled"},
		},
		{
			name: "label value that is not a valid label value",
			setup: func(t *testing.T, dir string) {
				writeFile(t, dir, "labelled.yaml", podWithMeta("labelled", "  labels:\n    a: \"not valid!\"\n"))
			},
			wantReason: "invalid",
		},
		{
			name: "900 KB anchor aliased 200 times",
			setup: func(t *testing.T, dir string) {
				writeFile(t, dir, "bomb.yaml", aliasBomb(900_000, 200))
			},
			wantReason: "too_large",
		},
		{
			name: "aliased collections",
			opts: []manifest.Option{manifest.WithMaxFileBytes(smallCap)},
			setup: func(t *testing.T, dir string) {
				// Billion laughs, small: 10^4 empty lists.
				writeFile(t, dir, "laughs.yaml", podWithMeta("laughs", "  labels: {}\n")+
					"x: &a [[],[],[],[],[],[],[],[],[],[]]\n"+
					"y: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"+
					"z: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"+
					"w: [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n")
			},
			wantReason: "too_large",
		},
		{
			name: "small aliases within the cap",
			setup: func(t *testing.T, dir string) {
				writeFile(t, dir, "aliased.yaml", podWithMeta("aliased", "  labels: {a: &v x, b: *v}\n"))
			},
			wantServed: []string{"default/aliased"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFile(t, dir, "good.yaml", podYAML("", "good", "", "i"))
			tt.setup(t, dir)
			h := start(t, dir, tt.opts...)
			want := append([]string{"default/good"}, tt.wantServed...)
			if got := h.names(); !equalSorted(got, want) {
				t.Errorf("serves %v, want %v", got, want)
			}
			wantErrors := map[string]float64{}
			if tt.wantReason != "" {
				wantErrors[tt.wantReason] = 1
			}
			h.checkErrors(wantErrors)
			h.quiet()
		})
	}
}

// TestFIFOSwappedIn renames a FIFO over a served manifest: the file is
// rejected as not regular and keeps its pods, and the Source goes on
// serving the changes of the other files.
func TestFIFOSwappedIn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"a.yaml": podYAML("", "a", "", "i"),
		"b.yaml": podYAML("", "b", "", "i:1"),
	})
	h := start(t, dir)
	staging := t.TempDir()
	mkfifo(t, filepath.Join(staging, "fifo"))
	if err := os.Rename(filepath.Join(staging, "fifo"), filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	replaceFile(t, dir, "b.yaml", podYAML("", "b", "", "i:2"))
	h.expect(upsert("default", "b"))
	if got := h.image("default", "b"); got != "i:2" {
		t.Errorf("image of b %q, want i:2", got)
	}
	h.pod("default", "a") // Kept.
	h.checkErrors(map[string]float64{"not_regular": 1})
	h.quiet()
}

// TestDirectoryRecreated removes the manifest directory and creates it
// again, with the periodic rescan off: the new directory is followed at
// once, by the watch of its parent.
func TestDirectoryRecreated(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		remove func(t *testing.T, dir string)
	}{
		{name: "removed", remove: func(t *testing.T, dir string) {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "renamed away", remove: func(t *testing.T, dir string) {
			if err := os.Rename(dir, dir+".old"); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "manifests")
			writeFiles(t, dir, map[string]string{"a.yaml": podYAML("", "a", "", "i")})
			h := start(t, dir, manifest.WithResyncInterval(-1))
			tt.remove(t, dir)
			h.expect(del("default", "a"))
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			// Written after the directory's return: found by the rescan
			// that its creation brings, or by the new watch.
			writeFile(t, dir, "b.yaml", podYAML("", "b", "", "i"))
			h.expect(upsert("default", "b"))
			writeFile(t, dir, "c.yaml", podYAML("", "c", "", "i"))
			h.expect(upsert("default", "c"))
			h.quiet()
		})
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

func equalSorted(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	seen := make(map[string]int)
	for _, g := range got {
		seen[g]++
	}
	for _, w := range want {
		if seen[w]--; seen[w] < 0 {
			return false
		}
	}
	return true
}
