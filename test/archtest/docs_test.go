package archtest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// architecture is docs/architecture.md, from this package's folder.
const architecture = "../../docs/architecture.md"

// TestArchitectureNamesEveryPackage fails when a package of the module, the
// product's or a rig, is not named (as `path`, relative to the module) in
// docs/architecture.md, so that the page keeps up with the tree.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{.Dir}}", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	doc, err := os.ReadFile(architecture)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 10 {
		t.Fatalf("go list found %d packages: the test would check nothing", len(lines))
	}
	for _, line := range lines {
		path, dir, _ := strings.Cut(line, " ")
		// go test caches by the folders the test opened: read each
		// package's, so that a package added runs the test again.
		_, _ = os.ReadDir(dir)
		_, _ = os.ReadDir(filepath.Dir(dir))
		rel := strings.TrimPrefix(path, module)
		if !strings.Contains(string(doc), "`"+rel+"`") {
			t.Errorf("docs/architecture.md does not name the package `%s`: add it to the table of packages or of rigs", rel)
		}
	}
}
