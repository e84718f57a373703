package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// writeFiles writes name → content into a new directory, executables
// with 0755.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// build runs imagebuild with args plus -layout and -archive in a new
// directory, and returns the archive's bytes and the layout's path.
func build(t *testing.T, args ...string) ([]byte, string) {
	t.Helper()
	out := t.TempDir()
	args = append(args, "-layout", filepath.Join(out, "oci"), "-archive", filepath.Join(out, "image.tar"))
	if err := run(args); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(out, "image.tar"))
	if err != nil {
		t.Fatal(err)
	}
	return data, filepath.Join(out, "oci")
}

func TestBuildIsReproducible(t *testing.T) {
	amd64 := writeFiles(t, map[string]string{"server": "amd64 server", "cli": "amd64 cli"})
	arm64 := writeFiles(t, map[string]string{"server": "arm64 server", "cli": "arm64 cli"})
	args := []string{"-ref", "example.com/x:1", "-created", "1700000000", "-entrypoint", "/server",
		"-label", "org.opencontainers.image.version=1",
		"-platform", "linux/amd64=" + amd64, "-platform", "linux/arm64=" + arm64}
	first, dir := build(t, args...)
	// Files modified later, and a later wall clock, give the same bytes.
	later := time.Now().Add(time.Hour)
	for _, d := range []string{amd64, arm64} {
		for _, f := range []string{"server", "cli"} {
			if err := os.Chtimes(filepath.Join(d, f), later, later); err != nil {
				t.Fatal(err)
			}
		}
	}
	second, _ := build(t, args...)
	if !bytes.Equal(first, second) {
		t.Errorf("two builds of the same files differ")
	}

	// The layout reads back: two platforms, the entry point, the files.
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := idx.IndexManifest()
	if err != nil || len(top.Manifests) != 1 || top.Manifests[0].Annotations[annotationRefName] != "example.com/x:1" {
		t.Fatalf("index.json: %+v, %v", top, err)
	}
	images, err := idx.ImageIndex(top.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := images.IndexManifest()
	if err != nil || len(m.Manifests) != 2 {
		t.Fatalf("image index: %+v, %v", m, err)
	}
	for i, want := range []string{"amd64", "arm64"} {
		d := m.Manifests[i]
		if d.Platform == nil || d.Platform.OS != "linux" || d.Platform.Architecture != want {
			t.Errorf("manifest %d: platform %+v, want linux/%s", i, d.Platform, want)
		}
		img, err := images.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Architecture != want || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/server" ||
			cfg.Config.Labels["org.opencontainers.image.version"] != "1" || !cfg.Created.Equal(time.Unix(1700000000, 0)) {
			t.Errorf("%s config: %+v", want, cfg)
		}
		fs, err := readTar(mutate.Extract(img))
		if err != nil {
			t.Fatal(err)
		}
		if fs["server"] != want+" server" || fs["cli"] != want+" cli" || len(fs) != 2 {
			t.Errorf("%s files: %q", want, fs)
		}
	}
}

func TestFlagErrors(t *testing.T) {
	dir := writeFiles(t, map[string]string{"server": "x"})
	out := t.TempDir()
	base := []string{"-ref", "example.com/x:1", "-layout", out + "/oci", "-entrypoint", "/server"}
	tests := []struct {
		name string
		args []string
	}{
		{name: "no platform", args: base},
		{name: "bad platform", args: append(base, "-platform", "linux="+dir)},
		{name: "empty directory", args: append(base, "-platform", "linux/amd64="+t.TempDir())},
		{name: "bad label", args: append(base, "-platform", "linux/amd64="+dir, "-label", "novalue")},
		{name: "bad created", args: append(base, "-platform", "linux/amd64="+dir, "-created", "yesterday")},
		{name: "no ref", args: []string{"-layout", out, "-entrypoint", "/server", "-platform", "linux/amd64=" + dir}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := run(tt.args); err == nil {
				t.Errorf("run(%q) succeeded, want an error", tt.args)
			}
		})
	}
}

// readTar returns the regular files of a tar stream by name.
func readTar(r io.ReadCloser) (map[string]string, error) {
	defer r.Close()
	files := make(map[string]string)
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		files[hdr.Name] = string(data)
	}
}
