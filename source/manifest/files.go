package manifest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// manifestExts are the file name extensions of manifest files, compared
// without regard to case.
var manifestExts = []string{".yaml", ".yml", ".json"}

// isManifestName reports whether a directory entry with this base name is a
// manifest file: not a dotfile, and ending in .yaml, .yml or .json. Editor
// temporary files (".x.yaml.swp", "x.yaml~", "#x.yaml#", ".#x.yaml") fail
// one of the two tests.
func isManifestName(name string) bool {
	if name == "" || strings.HasPrefix(name, ".") {
		return false
	}
	return slices.Contains(manifestExts, strings.ToLower(filepath.Ext(name)))
}

// listManifests returns the names of the manifest files in dir, sorted.
// Subdirectories are skipped; symbolic links are kept and followed when
// the file is read.
func listManifests(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() || !isManifestName(e.Name()) {
			continue
		}
		names = append(names, e.Name())
	}
	return names, nil
}
