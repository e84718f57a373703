package main

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/source/manifest"
)

// manifestDir holds the example pods, which make run serves and podsctl's
// help examples name.
const manifestDir = "../../examples/manifests"

// collector is a source.Sink that keeps the pods it gets.
type collector struct {
	mu     sync.Mutex
	pods   map[types.UID]*corev1.Pod
	synced chan struct{}
	once   sync.Once
}

func (c *collector) Upsert(pod *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pods[pod.UID] = pod
}

func (c *collector) Delete(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pods, uid)
}

func (c *collector) MarkSynced() { c.once.Do(func() { close(c.synced) }) }

// examplePods returns the pods of examples/manifests, read by the manifest
// source as the server reads them.
func examplePods(t *testing.T) []*corev1.Pod {
	t.Helper()
	sink := &collector{pods: make(map[types.UID]*corev1.Pod), synced: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- manifest.New(manifestDir, "node-1").Run(ctx, sink) }()
	select {
	case <-sink.synced:
	case err := <-done:
		cancel()
		t.Fatalf("manifest source ended before syncing: %v", err)
	case <-time.After(testTimeout):
		t.Fatal("manifest source did not sync")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(testTimeout):
		t.Fatal("manifest source did not stop")
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	pods := slices.Collect(maps.Values(sink.pods))
	sortPods(pods)
	return pods
}

// exampleServers serves the example pods from podsapi and from a kubelet,
// and returns the global flags that reach each.
func exampleServers(t *testing.T) map[string][]string {
	t.Helper()
	pods := examplePods(t)
	_, socket := startServer(t, server.Config{Limits: server.LimitsConfig{QPS: -1}}, false, pods...)
	kubelet := startKubelet(t, pods...).Path()
	return map[string][]string{
		"Podsapi":            {"--socket", socket},
		"PodsapiKubeletWire": {"--socket", socket, "--wire", "kubelet"},
		"Kubelet":            {"--socket", kubelet},
	}
}

// TestExamplesHonestTables checks, with the pods of examples/manifests, that
// a table with --fields shows what the pods say: orders-api of
// api-crashloop.yaml is in CrashLoopBackOff, 0/1 ready, restarted 7 times,
// in namespace shop, whatever fields the user asked for.
func TestExamplesHonestTables(t *testing.T) {
	for wire, global := range exampleServers(t) {
		t.Run(wire, func(t *testing.T) {
			tests := []struct {
				name   string
				args   []string
				golden string
			}{
				{"List", []string{"list"}, "examples.txt"},
				{"ListFields", []string{"list", "--fields", "metadata.name,status.phase"}, "examples.txt"},
				{"ListWide", []string{"list", "-o", "wide"}, "examples-wide.txt"},
				{"ListFieldsWide", []string{"list", "-o", "wide", "--fields", "status.phase"}, "examples-wide.txt"},
				{"GetFields", []string{"get", "shop/orders-api", "--fields", "metadata.name,status.phase"}, "examples-get-crashloop.txt"},
				{"GetUIDFields", []string{"get", "00000000-0000-4000-8000-00000000c001", "--fields", "status.phase"}, "examples-get-crashloop.txt"},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					stdout, stderr, code := run(t, slices.Concat(global, tt.args)...)
					if code != 0 || stderr != "" {
						t.Fatalf("exit %d, stderr %q", code, stderr)
					}
					golden(t, tt.golden, stdout)
				})
			}
		})
	}
}

// TestHelpExamples runs the examples of podsctl's help against the pods of
// examples/manifests: each must succeed and print something, so that a
// selector or a pod in the help names an example pod. A watch is run as the
// list with the same flags, which prints its snapshot.
func TestHelpExamples(t *testing.T) {
	global := exampleServers(t)["Podsapi"]
	stdout, _, code := run(t, "--help")
	if code != 0 {
		t.Fatal("podsctl --help failed")
	}
	help := stdout
	for _, cmd := range []string{"list", "get", "watch"} {
		stdout, _, code := run(t, cmd, "--help")
		if code != 0 {
			t.Fatalf("podsctl %s --help failed", cmd)
		}
		help += stdout
	}
	var examples [][]string
	for line := range strings.Lines(help) {
		args := strings.Fields(line)
		if !strings.HasPrefix(line, "  podsctl ") || strings.Contains(line, "[") || args[1] == "completion" {
			continue
		}
		examples = append(examples, args[1:])
	}
	if len(examples) < 8 {
		t.Fatalf("found %d examples in the help, want at least 8:\n%s", len(examples), help)
	}
	for _, args := range examples {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			// The examples' own --socket is replaced with the test's.
			if i := slices.Index(args, "--socket"); i >= 0 {
				args = slices.Delete(slices.Clone(args), i, i+2)
			}
			if i := slices.Index(args, "watch"); i >= 0 {
				args = slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == "--once" })
				args[i] = "list"
			}
			stdout, stderr, code := run(t, slices.Concat(global, args)...)
			if code != 0 || stderr != "" || stdout == "" || strings.HasPrefix(stdout, "apiVersion: v1\nitems: []") {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
			}
		})
	}
}

// TestCompletion checks the completion scripts and the completions podsctl
// computes for them.
func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		t.Run(shell, func(t *testing.T) {
			stdout, stderr, code := run(t, "completion", shell)
			if code != 0 || stderr != "" || !strings.Contains(stdout, "podsctl") {
				t.Fatalf("exit %d, stderr %q, stdout of %d bytes", code, stderr, len(stdout))
			}
		})
	}
	for wire, global := range exampleServers(t) {
		t.Run("Pods/"+wire, func(t *testing.T) {
			stdout, stderr, code := run(t, slices.Concat([]string{"__complete"}, global, []string{"get", "shop/"})...)
			want := "shop/cache-0\t" + string(manifest.DerivedUID("shop", "cache-0", "node-1")) + "\n" +
				"shop/orders-api\t00000000-0000-4000-8000-00000000c001\n" +
				"shop/web-7d9f8b6c5d-x2k4q\t00000000-0000-4000-8000-00000000a001\n" +
				":4\n"
			if code != 0 || stdout != want {
				t.Fatalf("exit %d, stdout %q, stderr %q; want stdout %q", code, stdout, stderr, want)
			}
		})
	}
	tests := []struct {
		name string
		args []string
		want []string // lines of stdout
	}{
		{"Commands", []string{"__complete", ""}, []string{"completion\t", "get\t", "list\t", "watch\t"}},
		{"Output", []string{"__complete", "list", "-o", ""}, []string{"table", "wide", "json", "yaml", "name"}},
		{"Wire", []string{"__complete", "--wire", ""}, []string{"auto", "podsapi", "kubelet"}},
		{"Flags", []string{"__complete", "watch", "--"}, []string{"--fields\t", "--namespace\t", "--output\t", "--selector\t", "--socket\t", "--wire\t"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := run(t, tt.args...)
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			for _, w := range tt.want {
				found := false
				for line := range strings.Lines(stdout) {
					found = found || strings.HasPrefix(line, w)
				}
				if !found {
					t.Errorf("no completion %q in %q", w, stdout)
				}
			}
		})
	}
}
