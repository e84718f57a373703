package archtest_test

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// module is the path of this module.
const module = "github.com/podsapi/podsapi/"

// rules are the import rules of docs/architecture.md: the packages below
// each prefix must never import, directly or indirectly, a package below any
// of the forbidden prefixes (test files do not count).
var rules = []struct {
	name   string
	pkg    string
	forbid []string
}{
	{"the store knows no reader and no source", "store", []string{"service", "server", "source", "client", "conformance", "fieldmask", "socket", "cmd"}},
	{"masks are a library of their own", "fieldmask", []string{"store", "service", "server", "source", "client", "conformance", "socket", "cmd"}},
	{"the service never knows the transport, the guards or the sources", "service", []string{"server", "guard", "socket", "source", "client", "conformance", "cmd"}},
	{"the guards know peers and limits, not the service", "guard", []string{"service", "server", "store", "socket", "source", "client", "conformance", "fieldmask", "cmd"}},
	{"the server never knows which source feeds it", "server", []string{"source", "client", "conformance", "cmd", "test/bench", "test/stress"}},
	{"the hardened HTTP layer knows connections and requests, not what is served on them", "httpguard", []string{"service", "server", "store", "fieldmask", "kubeapi", "source", "client", "conformance", "socket", "cmd"}},
	{"the transport knows connections, peers and bytes, not the service that writes them", "server/internal/transport", []string{"service", "store", "fieldmask", "source", "client", "conformance", "cmd"}},
	{"the workloads and the node's slice know the pods and the API server, not who serves them", "workload", []string{"store", "service", "server", "source", "client", "conformance", "kubeapi", "cmd"}},
	{"a source knows only its contract", "source", []string{"store", "service", "server", "client", "conformance", "cmd"}},
	{"the client is the server's peer, not its part", "client", []string{"store", "service", "server", "guard", "source", "socket", "conformance", "cmd"}},
	{"the suite judges any implementation over its socket", "conformance", []string{"store", "service", "server", "source", "client", "socket", "cmd"}},
	{"the socket package is a leaf", "socket", []string{"store", "service", "server", "source", "client", "conformance", "fieldmask", "cmd"}},
	{"the pods' vocabulary is a leaf, shared by the store and the client", "podtypes", []string{"store", "service", "server", "source", "client", "conformance", "fieldmask", "socket", "guard", "cmd", "gen", "internal"}},
	{"the cgroup parser is a leaf, for servers and clients", "podcgroup", []string{"store", "service", "server", "source", "client", "conformance", "fieldmask", "socket", "guard", "cmd"}},
	{"the runtime observer feeds the store's facts, never pods, and knows no reader", "nri", []string{"service", "server", "source", "client", "conformance", "fieldmask", "socket", "guard", "cmd"}},
	{"the error reasons are a leaf, shared by servers and clients", "errinfo", []string{"store", "service", "server", "source", "client", "conformance", "fieldmask", "socket", "cmd"}},
	{"a kind's store is the pods' store's machinery for another kind, fed by informers, and knows no reader", "kindstore", []string{"service", "server", "source", "client", "conformance", "fieldmask", "socket", "kubeapi", "cmd"}},
	{"the Kubernetes API serves the store, beside the gRPC service and never through it", "kubeapi", []string{"service", "server", "source", "client", "conformance", "fieldmask", "cmd"}},
	{"the Kubernetes API's door knows requests and peers, not the gRPC API or the sources", "kubeapi/door", []string{"service", "server", "source", "client", "conformance", "cmd"}},
	{"the product ships without its rigs", "", []string{rigs}},
}

// rigs is the folder of the test rigs: the only packages of the module that
// do not ship, and that no product package may import.
const rigs = "test"

// leaves are the product's small packages that every layer may import: they
// import nothing of the module but other leaves (hooks, the seam of
// server.New's tests, also the guard's peers, with what the guard imports,
// and the generated stubs).
var leaves = map[string][]string{
	"budget":             nil,
	"errinfo":            nil,
	"podcgroup":          nil,
	"podtypes":           nil,
	"socket":             nil,
	"internal/buildinfo": nil,
	"internal/h2c":       nil,
	"internal/loglimit":  nil,
	"internal/retry":     nil,
	"internal/admit":     nil,
	"internal/hooks":     {"guard", "socket", "gen"},
}

type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Deps       []string
}

// TestImportRules fails when a package imports what docs/architecture.md
// says it must never import.
func TestImportRules(t *testing.T) {
	cmd := exec.Command("go", "list", "-json=ImportPath,Dir,GoFiles,Deps", module+"...")
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		t.Fatalf("go list: %v\n%s", err, exit.Stderr)
	}
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
		// go test caches a result by the files and folders the test opened:
		// read each package's folder and stat its files, so that an import
		// edited or added runs the test again.
		_, _ = os.ReadDir(p.Dir)
		for _, f := range p.GoFiles {
			_, _ = os.Stat(filepath.Join(p.Dir, f))
		}
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages: the test would check nothing", len(pkgs))
	}
	checked := map[string]int{}
	for _, p := range pkgs {
		rel := strings.TrimPrefix(p.ImportPath, module)
		if under(rel, rigs) {
			continue
		}
		checkLeaf(t, rel, p.Deps)
		for _, r := range rules {
			if !under(rel, r.pkg) {
				continue
			}
			checked[r.name]++
			for _, dep := range p.Deps {
				d, ok := strings.CutPrefix(dep, module)
				if !ok {
					continue
				}
				for _, f := range r.forbid {
					if under(d, f) && (r.pkg == "" || !under(d, r.pkg)) {
						t.Errorf("%s imports %s: %s (docs/architecture.md)", rel, d, r.name)
					}
				}
			}
		}
	}
	for _, r := range rules {
		if checked[r.name] == 0 {
			t.Errorf("rule %q matched no package: %s moved?", r.name, r.pkg)
		}
	}
}

// checkLeaf fails when rel is one of the leaves and imports a package of the
// module that it may not.
func checkLeaf(t *testing.T, rel string, deps []string) {
	t.Helper()
	allowed, ok := leaves[rel]
	if !ok {
		return
	}
	for _, dep := range deps {
		d, ok := strings.CutPrefix(dep, module)
		if !ok || slices.ContainsFunc(allowed, func(a string) bool { return under(d, a) }) {
			continue
		}
		if _, leaf := leaves[d]; leaf {
			continue
		}
		t.Errorf("%s imports %s: a leaf of the product imports nothing of the module above it (docs/architecture.md)", rel, d)
	}
}

// under reports whether the package path rel is prefix or below it; a
// prefix ending in "/" matches only below it.
func under(rel, prefix string) bool {
	if prefix == "" {
		return true
	}
	if strings.HasSuffix(prefix, "/") {
		return strings.HasPrefix(rel, prefix)
	}
	return rel == prefix || strings.HasPrefix(rel, prefix+"/")
}
