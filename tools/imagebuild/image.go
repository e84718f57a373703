package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotation keys of the layout's index.json that name the image: the OCI
// one (read by skopeo, podman, docker load) and containerd's (read by
// `ctr images import` and so `kind load image-archive`).
const (
	annotationRefName        = "org.opencontainers.image.ref.name"
	annotationContainerdName = "io.containerd.image.name"
	annotationCreated        = "org.opencontainers.image.created"
)

// platformFiles is one platform of the image and the directory whose
// regular files become the root of its only layer.
type platformFiles struct {
	platform v1.Platform
	dir      string
}

// spec describes the image index to build.
type spec struct {
	ref        string            // reference written in index.json, e.g. ghcr.io/podsapi/podsapi:0.1.0
	entrypoint []string          // the config's Entrypoint
	labels     map[string]string // the config's Labels, and the index's annotations
	created    time.Time         // every timestamp: config, history, file modification times
	platforms  []platformFiles
}

// buildIndex returns an OCI image index of one image per platform, each an
// empty base plus one layer holding the platform's files.
func buildIndex(s spec) (v1.ImageIndex, error) {
	var adds []mutate.IndexAddendum
	for _, p := range s.platforms {
		img, err := buildImage(s, p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.platform, err)
		}
		adds = append(adds, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &p.platform},
		})
	}
	idx := mutate.AppendManifests(empty.Index, adds...)
	anns := map[string]string{annotationCreated: s.created.UTC().Format(time.RFC3339)}
	for k, v := range s.labels {
		anns[k] = v
	}
	return mutate.Annotations(idx, anns).(v1.ImageIndex), nil
}

// buildImage returns the image of one platform.
func buildImage(s spec, p platformFiles) (v1.Image, error) {
	layerTar, err := tarDir(p.dir, s.created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: p.platform.Architecture,
		OS:           p.platform.OS,
		Variant:      p.platform.Variant,
		Created:      v1.Time{Time: s.created},
		Config: v1.Config{
			Entrypoint: s.entrypoint,
			Labels:     s.labels,
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: s.created},
			CreatedBy: "make image",
			Comment:   "the static binaries, on an empty base",
		},
	})
}

// tarDir returns a tar stream of the regular files directly in dir, at the
// root of the archive, in name order, owned by root, with executables
// 0755 and other files 0644, all modified at mtime: the same files give the
// same bytes.
func tarDir(dir string, mtime time.Time) ([]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	n := 0
	for _, e := range entries { // os.ReadDir sorts by name
		if !e.Type().IsRegular() {
			return nil, fmt.Errorf("%s: not a regular file", filepath.Join(dir, e.Name()))
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		info, err := e.Info()
		if err != nil {
			return nil, err
		}
		mode := int64(0o644)
		if info.Mode()&0o111 != 0 {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeReg,
			Name:     e.Name(),
			Mode:     mode,
			Size:     int64(len(data)),
			ModTime:  mtime,
			Format:   tar.FormatPAX,
		}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("%s: no files", dir)
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeLayout writes idx as the only image of a new OCI image layout in dir,
// named ref.
func writeLayout(dir string, idx v1.ImageIndex, ref string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		annotationRefName:        ref,
		annotationContainerdName: ref,
	}))
}

// writeArchive writes the OCI image layout in dir as the tar archive out
// (an "oci-archive"), its entries in name order, owned by root, modified at
// mtime.
func writeArchive(out, dir string, mtime time.Time) (err error) {
	var paths []string
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", p)
		}
		paths = append(paths, p)
		return nil
	}); err != nil {
		return err
	}
	slices.Sort(paths)
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	tw := tar.NewWriter(f)
	for _, p := range paths {
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: name, Mode: 0o644, ModTime: mtime, Format: tar.FormatPAX}
		if info.IsDir() {
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, name+"/", 0o755
		} else {
			hdr.Typeflag, hdr.Size = tar.TypeReg, info.Size()
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if info.IsDir() {
			continue
		}
		if err := copyFile(tw, p); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// copyFile copies the file at p to w.
func copyFile(w io.Writer, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// parsePlatform parses "os/arch[/variant]=dir".
func parsePlatform(s string) (platformFiles, error) {
	plat, dir, ok := strings.Cut(s, "=")
	parts := strings.Split(plat, "/")
	if !ok || dir == "" || len(parts) < 2 || len(parts) > 3 || slices.Contains(parts, "") {
		return platformFiles{}, fmt.Errorf("-platform %q: want os/arch[/variant]=dir", s)
	}
	p := platformFiles{platform: v1.Platform{OS: parts[0], Architecture: parts[1]}, dir: filepath.Clean(dir)}
	if len(parts) == 3 {
		p.platform.Variant = parts[2]
	}
	return p, nil
}
