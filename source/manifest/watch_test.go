package manifest_test

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/podsapi/podsapi/source/manifest"
)

// image returns the image of the first container of the served pod.
func (h *harness) image(namespace, name string) string {
	h.t.Helper()
	return h.pod(namespace, name).Spec.Containers[0].Image
}

func upsert(namespace, name string) string {
	return fmt.Sprintf("upsert %s/%s %s", namespace, name, uidOf(namespace, name))
}

func del(namespace, name string) string {
	return fmt.Sprintf("delete %s", uidOf(namespace, name))
}

func TestFollowChanges(t *testing.T) {
	t.Parallel()
	const explicitUID = "00000000-0000-4000-8000-0000000000aa"
	tests := []struct {
		name       string
		files      map[string]string
		change     func(h *harness)
		wantErrors map[string]float64
	}{
		{
			name: "create a file",
			change: func(h *harness) {
				writeFile(h.t, h.dir, "web.yaml", podYAML("", "web", "", "nginx:1"))
				h.expect(upsert("default", "web"))
			},
		},
		{
			name:  "create a multi-document file next to an existing one",
			files: map[string]string{"a.yaml": podYAML("", "a", "", "i")},
			change: func(h *harness) {
				replaceFile(h.t, h.dir, "b.yaml", docs(podYAML("", "b1", "", "i"), podYAML("ns", "b2", "", "i")))
				h.expect(upsert("default", "b1"), upsert("ns", "b2"))
			},
		},
		{
			name:  "create a JSON file",
			files: map[string]string{"a.yaml": podYAML("", "a", "", "i")},
			change: func(h *harness) {
				writeFile(h.t, h.dir, "j.json", `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "j"},
					"spec": {"containers": [{"name": "c", "image": "i"}]}}`)
				h.expect(upsert("default", "j"))
			},
		},
		{
			name:  "edit in place keeps the UID",
			files: map[string]string{"web.yaml": podYAML("", "web", "", "nginx:1")},
			change: func(h *harness) {
				writeFile(h.t, h.dir, "web.yaml", podYAML("", "web", "", "nginx:2"))
				h.expect(upsert("default", "web"))
				if got := h.image("default", "web"); got != "nginx:2" {
					h.t.Errorf("image %q, want nginx:2", got)
				}
			},
		},
		{
			name:  "edit by renaming a temporary file over the manifest keeps the UID",
			files: map[string]string{"web.yaml": podYAML("", "web", "", "nginx:1")},
			change: func(h *harness) {
				replaceFile(h.t, h.dir, "web.yaml", podYAML("", "web", "", "nginx:2"))
				h.expect(upsert("default", "web"))
				if got := h.image("default", "web"); got != "nginx:2" {
					h.t.Errorf("image %q, want nginx:2", got)
				}
			},
		},
		{
			name:  "rename over a manifest that loses one pod and gains another",
			files: map[string]string{"pods.yaml": docs(podYAML("", "keep", "", "i"), podYAML("", "drop", "", "i"))},
			change: func(h *harness) {
				replaceFile(h.t, h.dir, "pods.yaml", docs(podYAML("", "keep", "", "i"), podYAML("", "add", "", "i")))
				h.expect(del("default", "drop"), upsert("default", "add"))
			},
		},
		{
			name: "delete a file",
			files: map[string]string{
				"a.yaml": docs(podYAML("", "a1", "", "i"), podYAML("", "a2", "", "i")),
				"b.yaml": podYAML("", "b", "", "i"),
			},
			change: func(h *harness) {
				removeFile(h.t, h.dir, "a.yaml")
				h.expect(del("default", "a1"), del("default", "a2"))
			},
		},
		{
			name:  "rename a file to a name that is not a manifest name",
			files: map[string]string{"a.yaml": podYAML("", "a", "", "i")},
			change: func(h *harness) {
				renameFile(h.t, h.dir, "a.yaml", "a.yaml.disabled")
				h.expect(del("default", "a"))
				renameFile(h.t, h.dir, "a.yaml.disabled", "a.yaml")
				h.expect(upsert("default", "a"))
			},
		},
		{
			name:  "rename a file to a dotfile",
			files: map[string]string{"a.yaml": podYAML("", "a", "", "i")},
			change: func(h *harness) {
				renameFile(h.t, h.dir, "a.yaml", ".a.yaml")
				h.expect(del("default", "a"))
			},
		},
		{
			name:  "rename a file to another manifest name",
			files: map[string]string{"a.yaml": podYAML("", "a", "", "i")},
			change: func(h *harness) {
				renameFile(h.t, h.dir, "a.yaml", "b.yml")
				// The two events of the rename arrive together (nothing to
				// send: same pod, same UID) or one by one (Delete, then
				// Upsert): both end with the pod served.
				writeFile(h.t, h.dir, "zz-marker.yaml", podYAML("", "marker", "", "i"))
				var got []string
				for c := h.next(); c.String() != upsert("default", "marker"); c = h.next() {
					got = append(got, c.String())
				}
				if len(got) != 0 && !slices.Equal(got, []string{del("default", "a"), upsert("default", "a")}) {
					h.t.Errorf("calls after the rename %q, want none or a Delete and an Upsert of default/a", got)
				}
				removeFile(h.t, h.dir, "zz-marker.yaml")
				h.expect(del("default", "marker"))
				if got := h.names(); !slices.Equal(got, []string{"default/a"}) {
					h.t.Errorf("served %q, want [default/a]", got)
				}
			},
		},
		{
			name:  "rewrite with the same bytes sends nothing",
			files: map[string]string{"a.yaml": podYAML("", "a", "", "i")},
			change: func(h *harness) {
				writeFile(h.t, h.dir, "a.yaml", podYAML("", "a", "", "i"))
				replaceFile(h.t, h.dir, "a.yaml", podYAML("", "a", "", "i"))
				h.quiet()
			},
		},
		{
			name:  "semantically equal rewrite sends nothing",
			files: map[string]string{"a.yaml": podYAML("", "a", "", "i")},
			change: func(h *harness) {
				writeFile(h.t, h.dir, "a.yaml", "# A comment.\n"+podYAML("default", "a", "", "i"))
				h.quiet()
			},
		},
		{
			name:  "chmod sends nothing",
			files: map[string]string{"a.yaml": podYAML("", "a", "", "i")},
			change: func(h *harness) {
				if err := os.Chmod(h.dir+"/a.yaml", 0o600); err != nil {
					h.t.Fatal(err)
				}
				h.quiet()
			},
		},
		{
			name:  "ignored files send nothing",
			files: map[string]string{"a.yaml": podYAML("", "a", "", "i")},
			change: func(h *harness) {
				writeFile(h.t, h.dir, ".hidden.yaml", podYAML("", "hidden", "", "i"))
				writeFile(h.t, h.dir, "a.yaml~", podYAML("", "backup", "", "i"))
				writeFile(h.t, h.dir, ".a.yaml.swp", podYAML("", "swap", "", "i"))
				writeFile(h.t, h.dir, "notes.txt", podYAML("", "notes", "", "i"))
				writeFile(h.t, h.dir, "sub/nested.yaml", podYAML("", "nested", "", "i"))
				h.quiet()
			},
		},
		{
			name:  "a file that turns bad keeps its pods and a fix is picked up",
			files: map[string]string{"a.yaml": podYAML("", "a", "", "nginx:1"), "b.yaml": podYAML("", "b", "", "i")},
			change: func(h *harness) {
				replaceFile(h.t, h.dir, "a.yaml", podYAML("", "a", "", "nginx:2")+"  bogus: true\n")
				h.quiet()
				if got := h.image("default", "a"); got != "nginx:1" {
					h.t.Errorf("image %q, want the last good nginx:1", got)
				}
				replaceFile(h.t, h.dir, "a.yaml", "kind: Pod\n")
				h.quiet()
				replaceFile(h.t, h.dir, "a.yaml", podYAML("", "a", "", "nginx:3"))
				h.expect(upsert("default", "a"))
				if got := h.image("default", "a"); got != "nginx:3" {
					h.t.Errorf("image %q, want nginx:3", got)
				}
			},
			wantErrors: map[string]float64{"decode": 2},
		},
		{
			name:  "a new bad file is skipped until fixed",
			files: map[string]string{"a.yaml": podYAML("", "a", "", "i")},
			change: func(h *harness) {
				replaceFile(h.t, h.dir, "b.yaml", podYAML("", "", "", "i"))
				h.quiet()
				replaceFile(h.t, h.dir, "b.yaml", podYAML("", "b", "", "i"))
				h.expect(upsert("default", "b"))
			},
			wantErrors: map[string]float64{"invalid": 1},
		},
		{
			name:  "a bad file deleted takes its last good pods",
			files: map[string]string{"a.yaml": podYAML("", "a", "", "i")},
			change: func(h *harness) {
				replaceFile(h.t, h.dir, "a.yaml", "{")
				h.quiet()
				removeFile(h.t, h.dir, "a.yaml")
				h.expect(del("default", "a"))
			},
			wantErrors: map[string]float64{"decode": 1},
		},
		{
			name:  "a truncated file keeps its pods until rewritten",
			files: map[string]string{"a.yaml": podYAML("", "a", "", "nginx:1")},
			change: func(h *harness) {
				writeFile(h.t, h.dir, "a.yaml", "")
				h.quiet()
				writeFile(h.t, h.dir, "a.yaml", podYAML("", "a", "", "nginx:2"))
				h.expect(upsert("default", "a"))
			},
		},
		{
			name:  "emptying a file of documents removes its pods",
			files: map[string]string{"a.yaml": podYAML("", "a", "", "i")},
			change: func(h *harness) {
				replaceFile(h.t, h.dir, "a.yaml", "# Disabled.\n")
				h.expect(del("default", "a"))
			},
		},
		{
			name:  "an earlier file taking over a pod replaces it under the same UID",
			files: map[string]string{"b.yaml": podYAML("", "web", "", "nginx:b")},
			change: func(h *harness) {
				replaceFile(h.t, h.dir, "a.yaml", podYAML("", "web", "", "nginx:a"))
				h.expect(upsert("default", "web"))
				if got := h.image("default", "web"); got != "nginx:a" {
					h.t.Errorf("image %q, want nginx:a from a.yaml", got)
				}
				removeFile(h.t, h.dir, "a.yaml")
				h.expect(upsert("default", "web"))
				if got := h.image("default", "web"); got != "nginx:b" {
					h.t.Errorf("image %q, want nginx:b from b.yaml", got)
				}
			},
			wantErrors: map[string]float64{"duplicate": 1},
		},
		{
			name:  "a later duplicate is skipped",
			files: map[string]string{"a.yaml": podYAML("", "web", "", "nginx:a")},
			change: func(h *harness) {
				replaceFile(h.t, h.dir, "c.yaml", docs(podYAML("", "web", "", "nginx:c"), podYAML("", "c", "", "i")))
				h.expect(upsert("default", "c"))
				if got := h.image("default", "web"); got != "nginx:a" {
					h.t.Errorf("image %q, want nginx:a", got)
				}
				replaceFile(h.t, h.dir, "c.yaml", docs(podYAML("", "web", "", "nginx:c2"), podYAML("", "c", "", "i")))
				h.quiet()
			},
			wantErrors: map[string]float64{"duplicate": 1},
		},
		{
			name:  "changing an explicit UID deletes the old pod before adding the new one",
			files: map[string]string{"a.yaml": podYAML("", "a", explicitUID, "i")},
			change: func(h *harness) {
				replaceFile(h.t, h.dir, "a.yaml", podYAML("", "a", "", "i"))
				first := h.next().String()
				if want := "delete " + explicitUID; first != want {
					h.t.Fatalf("first call %q, want %q", first, want)
				}
				h.expect(upsert("default", "a"))
			},
		},
	}
	for _, tt := range tests {
		for _, resync := range []time.Duration{0, 5 * time.Millisecond} {
			t.Run(fmt.Sprintf("%s/resync=%v", tt.name, resync), func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				writeFiles(t, dir, tt.files)
				h := start(t, dir, manifest.WithResyncInterval(resync))
				tt.change(h)
				h.quiet()
				h.checkErrors(tt.wantErrors)
				h.checkFreshRead()
			})
		}
	}
}

func TestDirectoryRemovedAndRecreated(t *testing.T) {
	t.Parallel()
	dir := t.TempDir() + "/manifests"
	writeFiles(t, dir, map[string]string{
		"a.yaml": podYAML("", "a", "", "i"),
		"b.yaml": podYAML("", "b", "", "i"),
	})
	h := start(t, dir, manifest.WithResyncInterval(5*time.Millisecond))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	h.expect(del("default", "a"), del("default", "b"))
	writeFiles(t, dir, map[string]string{"c.yaml": podYAML("", "c", "", "i")})
	h.expect(upsert("default", "c"))
	// The directory is watched again.
	writeFile(t, dir, "d.yaml", podYAML("", "d", "", "i"))
	h.expect(upsert("default", "d"))
	h.quiet()
	h.checkErrors(nil)
}
