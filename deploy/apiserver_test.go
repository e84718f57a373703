package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"
)

// apiserverVariant returns the ClusterRole and DaemonSet of
// deploy/apiserver: deploy/base's, with the variant's strategic merge
// patches applied as kustomize applies them.
func apiserverVariant(t *testing.T) (*rbacv1.ClusterRole, *appsv1.DaemonSet) {
	t.Helper()
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
		Patches    []struct {
			Path string `json:"path"`
		} `json:"patches"`
	}
	data, err := os.ReadFile("apiserver/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("apiserver/kustomization.yaml: %v", err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" || !slices.Equal(k.Resources, []string{"../base"}) {
		t.Fatalf("apiserver/kustomization.yaml: %s %s of %q, want a Kustomization of ../base", k.APIVersion, k.Kind, k.Resources)
	}
	base, _ := load(t)
	role, ds := base.roles[0].DeepCopy(), base.daemonSets[0].DeepCopy()
	for _, p := range k.Patches {
		patch, err := os.ReadFile(filepath.Join("apiserver", p.Path))
		if err != nil {
			t.Fatal(err)
		}
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(patch, &meta); err != nil {
			t.Fatalf("%s: %v", p.Path, err)
		}
		switch meta.Kind {
		case "ClusterRole":
			if meta.Metadata.Name != role.Name {
				t.Fatalf("%s patches ClusterRole %q, deploy/ has %q", p.Path, meta.Metadata.Name, role.Name)
			}
			applyPatch(t, p.Path, patch, role)
		case "DaemonSet":
			if meta.Metadata.Name != ds.Name {
				t.Fatalf("%s patches DaemonSet %q, deploy/ has %q", p.Path, meta.Metadata.Name, ds.Name)
			}
			applyPatch(t, p.Path, patch, ds)
		default:
			t.Fatalf("%s patches a %s", p.Path, meta.Kind)
		}
	}
	return role, ds
}

// applyPatch applies a strategic merge patch in YAML to obj.
func applyPatch[T any](t *testing.T, name string, patchYAML []byte, obj *T) {
	t.Helper()
	patch, err := yaml.YAMLToJSONStrict(patchYAML)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	original, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := strategicpatch.StrategicMergePatch(original, patch, obj)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out T
	if err := json.Unmarshal(merged, &out); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	*obj = out
}

func TestAPIServerVariant(t *testing.T) {
	role, ds := apiserverVariant(t)
	want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}}
	if !slices.EqualFunc(role.Rules, want, func(a, b rbacv1.PolicyRule) bool {
		return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) && slices.Equal(a.Verbs, b.Verbs) &&
			len(a.ResourceNames) == 0 && len(a.NonResourceURLs) == 0
	}) {
		t.Errorf("ClusterRole rules = %+v, want get, list and watch on pods only", role.Rules)
	}
	c := ds.Spec.Template.Spec.Containers[0]
	if src, _ := flagValue(c.Args, "source"); src != "apiserver" {
		t.Errorf("--source = %q, want apiserver", src)
	}
	if n, _ := flagValue(c.Args, "node-name"); n != "$(NODE_NAME)" {
		t.Errorf("--node-name = %q, want $(NODE_NAME)", n)
	}
	if s, _ := flagValue(c.Args, "socket"); s != defaultSocket {
		t.Errorf("--socket = %q, want %q", s, defaultSocket)
	}
	if c.Image == "" || c.LivenessProbe == nil || len(c.VolumeMounts) == 0 {
		t.Errorf("the patch lost the container's image, probe or mounts: %+v", c)
	}
	known := serverFlags(t)
	for _, name := range flagNames(c.Args) {
		if !known[name] || (name != "source" && flagSource(name) != "" && flagSource(name) != "apiserver") {
			t.Errorf("apiserver/daemonset.yaml: --%s is not a flag of podsapi-server --source=apiserver", name)
		}
	}
}

// flagSource returns the source a source-specific flag belongs to, by the
// prefix of its help text, or "".
func flagSource(name string) string {
	switch name {
	case "kubeconfig":
		return "apiserver"
	case "manifest-dir", "max-manifest-bytes":
		return "manifest"
	case "source-socket":
		return "kubelet-grpc"
	}
	if len(name) > 8 && name[:8] == "kubelet-" && name != "kubelet-wire" {
		return "kubelet-http"
	}
	return ""
}
