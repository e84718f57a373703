package deploy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// envCrane names the crane binary TestImagePush runs a registry with, set
// by make image-check.
const envCrane = "PODSAPI_CRANE"

// TestImagePush runs make image-push against a registry served by crane on
// a loopback port chosen by the kernel, and checks that the registry holds
// the image index of make image under its digest, both platforms. make
// image-check runs it after make image.
func TestImagePush(t *testing.T) {
	crane := os.Getenv(envCrane)
	if crane == "" || os.Getenv(envArchive) == "" {
		t.Skipf("$%s or $%s is unset: run make image image-check", envCrane, envArchive)
	}
	var layout ociIndex
	data, err := os.ReadFile("../build/image/oci/index.json")
	if err != nil {
		t.Fatal(err)
	}
	decodeJSON(t, "build/image/oci/index.json", data, &layout)
	if len(layout.Manifests) != 1 {
		t.Fatalf("build/image/oci/index.json: %d manifests, want the image index", len(layout.Manifests))
	}
	want := layout.Manifests[0].Digest

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	reg := exec.CommandContext(ctx, crane, "registry", "serve", "--address", "127.0.0.1:0")
	stderr, err := reg.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = reg.Process.Kill()
		_ = reg.Wait()
	}()
	// "2026/12/01 13:28:12 serving on port 39387"
	port := ""
	sc := bufio.NewScanner(stderr)
	for port == "" && sc.Scan() {
		if m := regexp.MustCompile(`serving on port (\d+)`).FindStringSubmatch(sc.Text()); m != nil {
			port = m[1]
		}
	}
	if port == "" {
		t.Fatalf("crane registry serve printed no port")
	}
	go func() {
		for sc.Scan() { // drain the registry's log
		}
	}()

	registry := "127.0.0.1:" + port + "/check"
	makefile, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	ref := registry + "/podsapi:" + makeDefault(t, makefile, "VERSION")
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(ctx, "make", "-C", root, "--no-print-directory", "image-push", "REGISTRY="+registry).CombinedOutput(); err != nil {
		t.Fatalf("make image-push: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(ctx, crane, "digest", ref).Output()
	if err != nil {
		t.Fatalf("crane digest %s: %v", ref, err)
	}
	if got := strings.TrimSpace(string(out)); got != want {
		t.Errorf("the registry has %s as %s, want the digest of make image's index, %s", ref, got, want)
	}
	out, err = exec.CommandContext(ctx, crane, "manifest", ref).Output()
	if err != nil {
		t.Fatalf("crane manifest %s: %v", ref, err)
	}
	var idx ociIndex
	if err := json.Unmarshal(out, &idx); err != nil {
		t.Fatal(err)
	}
	if idx.MediaType != mediaTypeIndex || len(idx.Manifests) != 2 {
		t.Errorf("the registry's %s: %s of %d manifests, want an image index of two platforms", ref, idx.MediaType, len(idx.Manifests))
	}
}
