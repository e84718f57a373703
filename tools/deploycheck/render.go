package deploycheck

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// A Variant is a way to deploy podsapi: a kustomization (deploy/ or a
// variant of it) with components.
type Variant struct {
	Name       string
	Base       string   // Directory of the kustomization, relative to deploy/.
	Components []string // Directories of components, relative to deploy/.
}

// Render renders v from the deploy directory dir, as kubectl apply -k
// would, in an in-memory copy of dir (so that the overlay that adds the
// components is never written to the source tree), and returns the YAML.
func Render(dir string, v Variant) ([]byte, error) {
	mem := filesys.MakeFsInMemory()
	root := os.DirFS(dir)
	err := fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".go") {
			return err
		}
		data, err := fs.ReadFile(root, p)
		if err != nil {
			return err
		}
		return mem.WriteFile(path.Join("/deploy", filepath.ToSlash(p)), data)
	})
	if err != nil {
		return nil, fmt.Errorf("copy %s: %w", dir, err)
	}
	var k strings.Builder
	fmt.Fprintf(&k, "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../../deploy/%s\n", v.Base)
	if len(v.Components) > 0 {
		k.WriteString("components:\n")
		for _, c := range v.Components {
			fmt.Fprintf(&k, "  - ../../deploy/%s\n", c)
		}
	}
	overlay := "/variants/" + v.Name
	if err := mem.WriteFile(overlay+"/kustomization.yaml", []byte(k.String())); err != nil {
		return nil, err
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, overlay)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", v.Name, err)
	}
	return m.AsYaml()
}
