package archtest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// server is the command that runs on every node: what it links, it pays
// in binary and in idle memory on every node, whether the feature that
// needs it is on or not (package init cannot be deferred).
const server = module + "cmd/podsapi-server"

// heavy are dependency trees that podsapi-server must not link, each with
// what it cost when it was linked (make bench's "podsapi-server at rest"
// measures the result: binary, packages, idle VmRSS and VmHWM).
var heavy = []struct {
	prefix, why string
}{
	{"k8s.io/client-go/kubernetes", "client-go's clientset and typed clients: their scheme registers every API group's types at init (21 MB of binary, 10 MiB of idle RSS); use a rest.RESTClient over a scheme of the group versions needed (kubeapi/door/reviews.go)"},
	{"k8s.io/client-go/applyconfigurations", "client-go's apply configurations, which come with the clientset"},
	{"k8s.io/client-go/informers", "client-go's informer factory of every API group"},
	{"k8s.io/client-go/dynamic", "client-go's dynamic client"},
	{"k8s.io/apiserver/plugin/", "k8s.io/apiserver's webhook authenticator and authorizer: they link the clientset, component-base's metrics, OpenTelemetry's SDK and CEL (with the clientset, 32 MB of binary and 20 MiB of idle RSS); kubeapi/door sends its reviews itself"},
	{"k8s.io/apiserver/pkg/authorization/authorizerfactory", "the delegating authorizer, the webhook authorizer's factory"},
	{"k8s.io/apiserver/pkg/authentication/authenticatorfactory", "the delegating authenticator, whose front-proxy authenticator links the clientset"},
	{"k8s.io/apiserver/pkg/util/webhook", "k8s.io/apiserver's webhook client (kubeconfig files, egress selection, tracing)"},
	{"k8s.io/apiserver/pkg/server", "the generic API server"},
	{"k8s.io/apiserver/pkg/authorization/cel", "the authorizers' CEL match conditions"},
	{"github.com/google/cel-go", "CEL"},
	{"cel.dev/expr", "CEL"},
	{"go.opentelemetry.io/otel/sdk", "OpenTelemetry's SDK"},
	{"go.opentelemetry.io/otel/exporters", "OpenTelemetry's exporters"},
	{"go.opentelemetry.io/contrib", "OpenTelemetry's instrumentation"},
	{"k8s.io/component-base/tracing", "component-base's tracing (OpenTelemetry's SDK)"},
	{"k8s.io/kube-openapi/pkg/validation", "the OpenAPI validation of kube-openapi"},
	{"github.com/google/gnostic-models", "OpenAPI models"},
	{"sigs.k8s.io/structured-merge-diff/v6/typed", "server-side apply's typed values (its value package, which apimachinery links, is light)"},
}

// maxServerPackages bounds the packages podsapi-server links (go list
// -deps, the standard library included): 613 when this bound was set, a
// twentieth of margin. A new dependency tree that passes it is measured
// with make bench (podsapi-server at rest) before the bound is raised.
const maxServerPackages = 645

// TestServerWeight fails when podsapi-server links one of the heavy
// dependency trees, or more packages than maxServerPackages.
func TestServerWeight(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", server).Output()
	if err != nil {
		var stderr []byte
		if exit, ok := err.(*exec.ExitError); ok {
			stderr = exit.Stderr
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	// go test caches a result by the files the test opened: read go.mod
	// and go.sum, so that a dependency added or upgraded runs the test
	// again (TestImportRules reads the module's own packages).
	mod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"go.mod", "go.sum"} {
		if _, err := os.ReadFile(filepath.Join(filepath.Dir(strings.TrimSpace(string(mod))), f)); err != nil {
			t.Fatal(err)
		}
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list found %d packages: the test would check nothing", len(deps))
	}
	for _, h := range heavy {
		for _, d := range deps {
			if d == h.prefix || strings.HasPrefix(d, strings.TrimSuffix(h.prefix, "/")+"/") {
				t.Errorf("podsapi-server links %s: %s", d, h.why)
				break
			}
		}
	}
	if len(deps) > maxServerPackages {
		t.Errorf("podsapi-server links %d packages, more than %d: measure what the new ones cost with make bench (podsapi-server at rest) before raising maxServerPackages", len(deps), maxServerPackages)
	}
}
