package deploy_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// The environment of TestImage, set by `make image-check`.
const (
	envArchive  = "PODSAPI_IMAGE_ARCHIVE"  // the archive of make image
	envImage    = "PODSAPI_IMAGE"          // the reference it must name
	envRevision = "PODSAPI_IMAGE_REVISION" // the revision label it must carry
)

// OCI media types (image-spec v1.1).
const (
	mediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	mediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	mediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// The labels every image config carries.
var imageLabels = []string{
	"org.opencontainers.image.source",
	"org.opencontainers.image.version",
	"org.opencontainers.image.revision",
	"org.opencontainers.image.title",
	"org.opencontainers.image.description",
	"org.opencontainers.image.licenses",
}

// The subset of the OCI image-spec JSON documents that the checks read.
type (
	ociDescriptor struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int64             `json:"size"`
		Platform    *ociPlatform      `json:"platform,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	}
	ociPlatform struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
		Variant      string `json:"variant,omitempty"`
	}
	ociIndex struct {
		SchemaVersion int             `json:"schemaVersion"`
		MediaType     string          `json:"mediaType"`
		Manifests     []ociDescriptor `json:"manifests"`
	}
	ociManifest struct {
		SchemaVersion int             `json:"schemaVersion"`
		MediaType     string          `json:"mediaType"`
		Config        ociDescriptor   `json:"config"`
		Layers        []ociDescriptor `json:"layers"`
	}
	ociConfig struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
		Config       struct {
			Entrypoint []string          `json:"Entrypoint"`
			Cmd        []string          `json:"Cmd"`
			User       string            `json:"User"`
			Labels     map[string]string `json:"Labels"`
		} `json:"config"`
		RootFS struct {
			Type    string   `json:"type"`
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
)

// ociArchive is the content of an oci-archive: the files of an OCI image
// layout by name.
type ociArchive map[string][]byte

// readArchive reads the tar archive at path.
func readArchive(t *testing.T, path string) ociArchive {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%v (run make image first)", err)
	}
	defer f.Close()
	a := make(ociArchive)
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return a
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("%s: %s: %v", path, hdr.Name, err)
		}
		a[strings.TrimPrefix(hdr.Name, "./")] = data
	}
}

// blob returns the blob d describes, after checking its digest and size.
func (a ociArchive) blob(t *testing.T, d ociDescriptor) []byte {
	t.Helper()
	hexDigest, ok := strings.CutPrefix(d.Digest, "sha256:")
	if !ok {
		t.Fatalf("descriptor %+v: want a sha256 digest", d)
	}
	data, ok := a["blobs/sha256/"+hexDigest]
	if !ok {
		t.Fatalf("blob %s is missing", d.Digest)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != hexDigest || int64(len(data)) != d.Size {
		t.Fatalf("blob %s: sha256:%x, %d bytes; the descriptor says %d bytes", d.Digest, sum, len(data), d.Size)
	}
	return data
}

// decodeJSON decodes data into v strictly.
func decodeJSON(t *testing.T, what string, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// layerFiles returns the regular files of a gzip-compressed layer, with
// their tar headers, after checking its diff ID.
func layerFiles(t *testing.T, layer []byte, diffID string) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(layer))
	if err != nil {
		t.Fatalf("layer: %v", err)
	}
	uncompressed, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("layer: %v", err)
	}
	if sum := sha256.Sum256(uncompressed); "sha256:"+hex.EncodeToString(sum[:]) != diffID {
		t.Fatalf("layer: uncompressed sha256:%x, the config's diff_id is %s", sum, diffID)
	}
	headers, files := make(map[string]*tar.Header), make(map[string][]byte)
	tr := tar.NewReader(bytes.NewReader(uncompressed))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return headers, files
		}
		if err != nil {
			t.Fatalf("layer: %v", err)
		}
		name := "/" + strings.TrimPrefix(strings.TrimPrefix(hdr.Name, "./"), "/")
		headers[name] = hdr
		if hdr.Typeflag == tar.TypeReg {
			if files[name], err = io.ReadAll(tr); err != nil {
				t.Fatalf("layer: %s: %v", name, err)
			}
		}
	}
}

// elfMachines maps GOARCH to the ELF machine of its binaries.
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkStatic checks that bin is a static ELF executable for goarch, built
// by Go with CGO_ENABLED=0 and -trimpath.
func checkStatic(t *testing.T, name string, bin []byte, goarch string) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Errorf("%s: not an ELF file: %v", name, err)
		return
	}
	defer f.Close()
	if f.Machine != elfMachines[goarch] || f.Type != elf.ET_EXEC {
		t.Errorf("%s: ELF %v %v, want an executable for %v", name, f.Type, f.Machine, elfMachines[goarch])
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s: has a program interpreter (PT_INTERP): dynamically linked", name)
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("%s: needs shared libraries %q (DT_NEEDED), %v", name, libs, err)
	}
	info, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		t.Errorf("%s: no Go build information: %v", name, err)
		return
	}
	settings := make(map[string]string)
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	want := map[string]string{"CGO_ENABLED": "0", "-trimpath": "true", "GOOS": "linux", "GOARCH": goarch}
	for k, v := range want {
		if settings[k] != v {
			t.Errorf("%s: built with %s=%q, want %q", name, k, settings[k], v)
		}
	}
}

// imageCommands returns the executables deploy/ runs from the image: the
// DaemonSet's command and probes, the example agent's command.
func imageCommands(t *testing.T) []string {
	t.Helper()
	server, agent := load(t)
	c := server.daemonSets[0].Spec.Template.Spec.Containers[0]
	cmds := []string{c.Command[0], c.LivenessProbe.Exec.Command[0], c.ReadinessProbe.Exec.Command[0], c.StartupProbe.Exec.Command[0],
		agent.pods[0].Spec.Containers[0].Command[0]}
	slices.Sort(cmds)
	return slices.Compact(cmds)
}

// TestImage checks the archive that `make image` builds: an OCI index of
// linux/amd64 and linux/arm64 images, named as deploy/ names it, each with
// the server as entry point, the OCI labels, and one layer holding static
// podsapi-server and podsctl; then runs the binaries of the layer of this
// machine's architecture. `make image-check` runs it; it is skipped when
// $PODSAPI_IMAGE_ARCHIVE is unset.
func TestImage(t *testing.T) {
	path := os.Getenv(envArchive)
	if path == "" {
		t.Skipf("$%s is unset: run make image image-check", envArchive)
	}
	server, _ := load(t)
	deployed := server.daemonSets[0].Spec.Template.Spec.Containers[0]
	wantRef := os.Getenv(envImage)
	if wantRef == "" {
		wantRef = deployedImage(t)
	}
	a := readArchive(t, path)

	var layout struct {
		ImageLayoutVersion string `json:"imageLayoutVersion"`
	}
	decodeJSON(t, "oci-layout", a["oci-layout"], &layout)
	if layout.ImageLayoutVersion != "1.0.0" {
		t.Errorf("oci-layout: imageLayoutVersion %q, want 1.0.0", layout.ImageLayoutVersion)
	}
	var top ociIndex
	decodeJSON(t, "index.json", a["index.json"], &top)
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != mediaTypeIndex {
		t.Fatalf("index.json: want one image index, got %+v", top.Manifests)
	}
	for _, k := range []string{"org.opencontainers.image.ref.name", "io.containerd.image.name"} {
		if got := top.Manifests[0].Annotations[k]; got != wantRef {
			t.Errorf("index.json: %s = %q, want %q", k, got, wantRef)
		}
	}
	if d := deployedImage(t); wantRef != d {
		t.Logf("the archive names %s; deploy/ runs %s", wantRef, d)
	}

	var idx ociIndex
	decodeJSON(t, "image index", a.blob(t, top.Manifests[0]), &idx)
	if idx.SchemaVersion != 2 || idx.MediaType != mediaTypeIndex {
		t.Errorf("image index: schemaVersion %d, mediaType %q", idx.SchemaVersion, idx.MediaType)
	}
	var platforms []string
	for _, d := range idx.Manifests {
		if d.Platform == nil {
			t.Fatalf("image index: manifest %s has no platform", d.Digest)
		}
		platforms = append(platforms, d.Platform.OS+"/"+d.Platform.Architecture)
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Fatalf("image index: platforms %q, want %q", platforms, want)
	}

	version, _ := strings.CutPrefix(wantRef[strings.LastIndex(wantRef, ":")+1:], "v")
	for _, d := range idx.Manifests {
		goarch := d.Platform.Architecture
		t.Run(d.Platform.OS+"/"+goarch, func(t *testing.T) {
			if d.MediaType != mediaTypeManifest {
				t.Fatalf("mediaType %q, want %q", d.MediaType, mediaTypeManifest)
			}
			var m ociManifest
			decodeJSON(t, "manifest", a.blob(t, d), &m)
			if m.SchemaVersion != 2 || m.Config.MediaType != mediaTypeConfig || len(m.Layers) != 1 || m.Layers[0].MediaType != mediaTypeLayer {
				t.Fatalf("manifest: want an OCI config and one gzip layer, got %+v", m)
			}
			var cfg ociConfig
			decodeJSON(t, "config", a.blob(t, m.Config), &cfg)
			if cfg.OS != d.Platform.OS || cfg.Architecture != goarch {
				t.Errorf("config: %s/%s, the index says %s/%s", cfg.OS, cfg.Architecture, d.Platform.OS, goarch)
			}
			if want := deployed.Command; !slices.Equal(cfg.Config.Entrypoint, want) || len(cfg.Config.Cmd) != 0 {
				t.Errorf("config: entrypoint %q cmd %q, want the DaemonSet's command %q and no cmd", cfg.Config.Entrypoint, cfg.Config.Cmd, want)
			}
			if u := cfg.Config.User; u != "" && u != "0" && u != "0:0" && u != "root" {
				t.Errorf("config: user %q, want root (the socket is root-only)", u)
			}
			for _, k := range imageLabels {
				if cfg.Config.Labels[k] == "" {
					t.Errorf("config: label %s is missing", k)
				}
			}
			if got := cfg.Config.Labels["org.opencontainers.image.version"]; got != version {
				t.Errorf("config: version label %q, the tag says %q", got, version)
			}
			if want := os.Getenv(envRevision); want != "" && cfg.Config.Labels["org.opencontainers.image.revision"] != want {
				t.Errorf("config: revision label %q, want %q", cfg.Config.Labels["org.opencontainers.image.revision"], want)
			}
			if cfg.RootFS.Type != "layers" || len(cfg.RootFS.DiffIDs) != 1 {
				t.Fatalf("config: rootfs %+v, want one layer", cfg.RootFS)
			}

			headers, files := layerFiles(t, a.blob(t, m.Layers[0]), cfg.RootFS.DiffIDs[0])
			want := []string{"/podsapi-conformance", "/podsapi-server", "/podsctl"}
			for _, name := range imageCommands(t) {
				if !slices.Contains(want, name) {
					t.Errorf("deploy/ runs %s, which is not one of the image's binaries %q", name, want)
				}
			}
			for _, name := range want {
				hdr, ok := headers[name]
				if !ok || hdr.Typeflag != tar.TypeReg {
					t.Errorf("layer: no file %s", name)
					continue
				}
				if hdr.Mode&0o111 == 0 || hdr.Uid != 0 || hdr.Gid != 0 {
					t.Errorf("layer: %s: mode %o, owner %d:%d, want an executable owned by root", name, hdr.Mode, hdr.Uid, hdr.Gid)
				}
				checkStatic(t, name, files[name], goarch)
			}
			if goarch == runtime.GOARCH && runtime.GOOS == "linux" && !t.Failed() {
				runFromLayer(t, files)
			}
		})
	}
}

// runFromLayer writes the binaries of a layer to a directory and runs
// them: the server's --help exits as the flag package's does (2, the
// usage on stderr), the server serves the example manifests, its probe
// (the DaemonSet's liveness probe) passes, and podsctl lists the pods.
func runFromLayer(t *testing.T, files map[string][]byte) {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(name)), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	server, podsctl := filepath.Join(dir, "podsapi-server"), filepath.Join(dir, "podsctl")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("server --help", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, server, "--help")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err != nil {
			t.Errorf("podsapi-server --help: %v, want exit status 0", err)
		}
		if !strings.HasPrefix(stdout.String(), "Usage: podsapi-server") || !strings.Contains(stdout.String(), "--socket") || stderr.Len() != 0 {
			t.Errorf("podsapi-server --help: stdout %q, stderr %q, want the usage on stdout", stdout.String(), stderr.String())
		}
	})

	t.Run("podsctl --help", func(t *testing.T) {
		out, err := exec.CommandContext(ctx, podsctl, "--help").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "podsctl") {
			t.Errorf("podsctl --help: %v\n%s", err, out)
		}
	})

	// An implementer's CI runs the suite from the image, without Go: here
	// against the image's own server, started by the suite's runner, on a
	// few cases (make conformance runs them all).
	t.Run("podsapi-conformance", func(t *testing.T) {
		features, err := filepath.Abs("../conformance/features/podsapi-server.yaml")
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, filepath.Join(dir, "podsapi-conformance"),
			"--server-cmd", server+" --socket {socket} --manifest-dir {manifests} --metrics-address {metrics} --log-level warn",
			"--features", features, "--run", "^(ListPods/Pods|GetPod/Pod|WatchPods/FieldMask/None)$")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "ListPods/Pods") {
			t.Errorf("podsapi-conformance from the image: %v\n%s", err, out)
		}
	})

	t.Run("serve, probe, list", func(t *testing.T) {
		sockDir, err := os.MkdirTemp("", "x")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(sockDir)
		sock := filepath.Join(sockDir, "pods.sock")
		manifests, err := filepath.Abs("../examples/manifests")
		if err != nil {
			t.Fatal(err)
		}
		srv := exec.CommandContext(ctx, server, "--socket="+sock, "--manifest-dir="+manifests,
			"--metrics-address=", "--node-name=image-check", "--log-level=info")
		logsR, logsW := io.Pipe()
		srv.Stderr = logsW
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() {
			err := srv.Wait()
			logsW.Close()
			exited <- err
		}()
		// The server logs "serving the Pods API" once its socket listens.
		var logs bytes.Buffer
		serving, logsDone := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(logsDone)
			sc := bufio.NewScanner(logsR)
			for sc.Scan() {
				logs.WriteString(sc.Text() + "\n")
				if strings.Contains(sc.Text(), "serving the Pods API") {
					close(serving)
					break
				}
			}
			io.Copy(io.Discard, logsR)
		}()
		select {
		case <-serving:
		case err := <-exited:
			<-logsDone
			t.Fatalf("server exited before serving: %v\n%s", err, logs.String())
		}
		defer func() {
			_ = srv.Process.Signal(os.Interrupt)
			if err := <-exited; err != nil {
				t.Errorf("server: %v, want a clean exit on SIGINT", err)
			}
			<-logsDone
		}()
		if out, err := exec.CommandContext(ctx, server, "probe", "--socket="+sock).CombinedOutput(); err != nil {
			t.Errorf("podsapi-server probe: %v\n%s", err, out)
		}
		out, err := exec.CommandContext(ctx, podsctl, "list", "--socket", sock).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "orders-api") {
			t.Errorf("podsctl list: %v\n%s", err, out)
		}
	})
}

// makeDefault returns the default value of a `NAME ?= value` variable of
// the Makefile.
func makeDefault(t *testing.T, makefile []byte, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + ` \?= (\S+)\s*$`).FindSubmatch(makefile)
	if m == nil {
		t.Fatalf("Makefile: no %s ?= default", name)
	}
	return string(m[1])
}

// TestImageTag checks that `make image` names its image as deploy/ does,
// and that the Dockerfile builds the same entry point and files.
func TestImageTag(t *testing.T) {
	makefile, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	version := makeDefault(t, makefile, "VERSION")
	image := strings.ReplaceAll(makeDefault(t, makefile, "IMAGE"), "$(VERSION)", version)
	server, agent := load(t)
	for file, got := range map[string]string{
		"daemonset.yaml":     deployedImage(t),
		"example-agent.yaml": agent.pods[0].Spec.Containers[0].Image,
	} {
		if got != image {
			t.Errorf("%s runs %s; make image builds %s", file, got, image)
		}
	}

	dockerfile, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	entry := fmt.Sprintf("ENTRYPOINT [%q]", server.daemonSets[0].Spec.Template.Spec.Containers[0].Command[0])
	if !bytes.Contains(dockerfile, []byte("\n"+entry+"\n")) {
		t.Errorf("Dockerfile: no %s", entry)
	}
	if want := "ARG VERSION=" + version + "\n"; !bytes.Contains(dockerfile, []byte(want)) {
		t.Errorf("Dockerfile: no %q", want)
	}
	for _, name := range imageCommands(t) {
		if !regexp.MustCompile(`(?m)^COPY --from=build .*` + regexp.QuoteMeta(name) + `\b`).Match(dockerfile) {
			t.Errorf("Dockerfile: copies no %s", name)
		}
	}
	for _, k := range imageLabels {
		if !bytes.Contains(dockerfile, []byte(k+"=")) {
			t.Errorf("Dockerfile: no label %s", k)
		}
	}
}
