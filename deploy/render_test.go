package deploy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"sigs.k8s.io/yaml"

	"github.com/podsapi/podsapi/test/kubetest"
)

// A variant is a way to deploy podsapi: a kustomization (deploy/ or a
// variant of it) with components.
type variant struct {
	name       string
	base       string   // Directory of the kustomization, relative to deploy/.
	components []string // Directories of components, relative to deploy/.
}

// An object is one document of a rendering.
type object struct {
	apiVersion, kind, namespace, name string
	raw                               []byte
}

// kubectlTimeout bounds each kubectl run of a test.
const kubectlTimeout = 2 * time.Minute

// cluster is the real kube-apiserver v1.37.2 (with etcd) that the renderings
// are checked against, and the kubectl of the same release that renders and
// applies them, both from make kube-bin (kubetest.EnvBin).
type cluster struct {
	kubectl, kubeconfig, cacheDir string
}

// startCluster starts the control plane, or skips the test when
// kubetest.EnvBin is unset (make deploy-check sets it).
func startCluster(t *testing.T) *cluster {
	t.Helper()
	cp := kubetest.Start(t)
	return &cluster{
		kubectl:    filepath.Join(os.Getenv(kubetest.EnvBin), "kubectl"),
		kubeconfig: cp.Kubeconfig(t, kubetest.AdminUser, cp.Host()),
		cacheDir:   t.TempDir(),
	}
}

// run runs kubectl with args and stdin, and returns its output; an error
// holds what kubectl printed.
func (c *cluster) run(t *testing.T, stdin []byte, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), kubectlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.kubectl, append([]string{"--kubeconfig=" + c.kubeconfig, "--cache-dir=" + c.cacheDir}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("kubectl %s: %w: %s%s", strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return out, nil
}

// render renders v as kubectl apply -k would, with kubectl kustomize, from a
// copy of deploy/ (so that the overlay that adds the components is never
// written to the source tree), and returns the YAML.
func (c *cluster) render(t *testing.T, v variant) []byte {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "deploy"), os.DirFS(".")); err != nil {
		t.Fatal(err)
	}
	var k strings.Builder
	fmt.Fprintf(&k, "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../../deploy/%s\n", v.base)
	if len(v.components) > 0 {
		k.WriteString("components:\n")
		for _, comp := range v.components {
			fmt.Fprintf(&k, "  - ../../deploy/%s\n", comp)
		}
	}
	overlay := filepath.Join(dir, "variants", v.name)
	if err := os.MkdirAll(overlay, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(k.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := c.run(t, nil, "kustomize", overlay)
	if err != nil {
		t.Fatalf("%s: %v", v.name, err)
	}
	return out
}

// validate checks every document of a rendering as the API server admits
// it: the Namespaces are created (the other objects need them), every other
// built-in object is applied with a server-side dry run and strict field
// validation (unknown and duplicate fields are errors, as with kubectl's
// --validate=strict), so that the API server's own decoding, defaulting,
// validation and admission judge it. The Prometheus Operator's PodMonitor,
// whose CRD the control plane does not have, is decoded strictly into its
// Go type.
func (c *cluster) validate(t *testing.T, rendered []byte) ([]object, error) {
	t.Helper()
	var objs []object
	var namespaces, rest bytes.Buffer
	var errs []error
	docs, err := documents(rendered)
	if err != nil {
		return nil, err
	}
	for _, doc := range docs {
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, err
		}
		o := object{apiVersion: meta.APIVersion, kind: meta.Kind, namespace: meta.Metadata.Namespace, name: meta.Metadata.Name, raw: doc}
		objs = append(objs, o)
		switch {
		case o.apiVersion == monitoringv1.SchemeGroupVersion.String():
			if o.kind != monitoringv1.PodMonitorsKind {
				errs = append(errs, fmt.Errorf("%s %s/%s: not a PodMonitor", o.kind, o.namespace, o.name))
				break
			}
			var pm monitoringv1.PodMonitor
			if err := yaml.UnmarshalStrict(doc, &pm); err != nil {
				errs = append(errs, fmt.Errorf("PodMonitor %s/%s: %w", o.namespace, o.name, err))
			}
		case o.apiVersion == "v1" && o.kind == "Namespace":
			fmt.Fprintf(&namespaces, "---\n%s\n", doc)
		default:
			fmt.Fprintf(&rest, "---\n%s\n", doc)
		}
	}
	if namespaces.Len() > 0 {
		if _, err := c.run(t, namespaces.Bytes(), "apply", "--server-side", "--validate=strict", "-f", "-"); err != nil {
			errs = append(errs, err)
		}
	}
	if rest.Len() > 0 {
		if _, err := c.run(t, rest.Bytes(), "apply", "--server-side", "--dry-run=server", "--validate=strict", "-f", "-"); err != nil {
			errs = append(errs, err)
		}
	}
	return objs, errors.Join(errs...)
}
