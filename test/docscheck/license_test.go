package docscheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLicense checks that LICENSE is the Apache License 2.0 and that the
// SPDX headers of the sources and the image's licenses label say so too.
func TestLicense(t *testing.T) {
	b, err := os.ReadFile("../../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	if l := strings.Fields(string(b)); len(l) < 5 || strings.Join(l[:5], " ") != "Apache License Version 2.0, January" {
		t.Errorf("LICENSE does not start with the Apache License 2.0: %q", strings.Join(l[:min(5, len(l))], " "))
	}
	spdx := regexp.MustCompile(`SPDX-License-Identifier: (\S+)`)
	err = filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "build" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.Contains(".go .proto .py .ts .sh", filepath.Ext(path)) || filepath.Ext(path) == "" {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range spdx.FindAllSubmatch(src, -1) {
			if id := string(m[1]); id != "Apache-2.0" && !strings.HasSuffix(path, "license_test.go") {
				t.Errorf("%s: SPDX-License-Identifier %s, LICENSE is Apache-2.0", path, id)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"../../Makefile", "../../Dockerfile"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`(IMAGE_LICENSES \?= |image\.licenses=)Apache-2\.0`).Match(b) {
			t.Errorf("%s: the image's licenses label is not Apache-2.0", f)
		}
	}
}
