package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/podsapi/podsapi/server"
)

// TestSelectorErrorHint checks that a field selector the server refuses
// gets a hint about selectors, not about field masks, on both wires.
func TestSelectorErrorHint(t *testing.T) {
	_, podsapi := startServer(t, server.Config{}, false, testPods()...)
	kubelet := startKubelet(t, testPods()...).Path()
	for _, socket := range []string{podsapi, kubelet} {
		for _, cmd := range []string{"list", "watch"} {
			_, stderr, code := run(t, cmd, "--socket", socket, "--field-selector", "spec.nodname=node-1")
			if code != exitServer || !strings.Contains(stderr, "INVALID_ARGUMENT") ||
				!strings.Contains(stderr, "hint: selectors take Kubernetes syntax") || strings.Contains(stderr, "field paths") {
				t.Errorf("%s on %s: exit %d, stderr %q; want INVALID_ARGUMENT with a selector hint only", cmd, socket, code, stderr)
			}
		}
	}
}

func TestAllNamespaces(t *testing.T) {
	_, socket := startServer(t, server.Config{}, false, testPods()...)
	all, _, code := run(t, "list", "--socket", socket, "-o", "name")
	if code != 0 {
		t.Fatal("list failed")
	}
	for _, args := range [][]string{{"-A"}, {"--all-namespaces"}} {
		out, stderr, code := run(t, slices.Concat([]string{"list", "--socket", socket, "-o", "name"}, args)...)
		if code != 0 || out != all {
			t.Errorf("list %q: exit %d, stdout %q (stderr %q), want the pods of every namespace %q", args, code, out, stderr, all)
		}
	}
	_, stderr, code := run(t, "watch", "--socket", socket, "-A", "-n", "shop")
	if code != exitUsage || !strings.Contains(stderr, "exclude each other") {
		t.Errorf("-A -n shop: exit %d, stderr %q, want a usage error", code, stderr)
	}
}

func TestCompleteNamespacesAndFields(t *testing.T) {
	_, socket := startServer(t, server.Config{}, false, testPods()...)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"Namespaces", []string{"list", "-n", ""}, "batch\ndefault\nshop\n:4\n"},
		{"NamespacePrefix", []string{"watch", "--namespace", "s"}, "shop\n:4\n"},
		{"Fields", []string{"list", "--fields", "metadata.nam"}, "metadata.name\nmetadata.namespace\n:6\n"},
		{"FieldsAfterComma", []string{"get", "x", "--fields", "status.phase,status.podI"}, "status.phase,status.podIP\nstatus.phase,status.podIPs\n:6\n"},
		{"FieldsUnknown", []string{"list", "--fields", "nope.x"}, ":6\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := run(t, slices.Concat([]string{"__complete", "--socket", socket}, tc.args)...)
			if code != 0 || out != tc.want {
				t.Errorf("exit %d, stdout %q, stderr %q; want %q", code, out, stderr, tc.want)
			}
		})
	}
}
