package archtest_test

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
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
	{"the server never knows which source feeds it", "server", []string{"source", "client", "conformance", "cmd", "internal/bench", "internal/stress"}},
	{"the transport knows connections, peers and bytes, not the service that writes them", "server/internal/transport", []string{"service", "store", "fieldmask", "source", "client", "conformance", "cmd"}},
	{"a source knows only its contract", "source", []string{"store", "service", "server", "client", "conformance", "cmd"}},
	{"the client is the server's peer, not its part", "client", []string{"store", "service", "server", "guard", "source", "socket", "conformance", "cmd"}},
	{"the suite judges any implementation over its socket", "conformance", []string{"store", "service", "server", "source", "client", "socket", "cmd"}},
	{"the socket package is a leaf", "socket", []string{"store", "service", "server", "source", "client", "conformance", "fieldmask", "cmd"}},
	{"the pods' vocabulary is a leaf, shared by the store and the client", "podtypes", []string{"store", "service", "server", "source", "client", "conformance", "fieldmask", "socket", "guard", "cmd", "gen", "internal"}},
	{"the cgroup parser is a leaf, for servers and clients", "podcgroup", []string{"store", "service", "server", "source", "client", "conformance", "fieldmask", "socket", "guard", "cmd"}},
	{"the error reasons are a leaf, shared by servers and clients", "errinfo", []string{"store", "service", "server", "source", "client", "conformance", "fieldmask", "socket", "cmd"}},
}

// exempt are packages a rule's prefix covers that are not held to it: test
// support that assembles what the rule keeps apart.
var exempt = []string{
	// The self-test's implementations are servers built from our packages.
	module + "internal/testimpl",
	// Test support of the sources: fakes of the kubelet and recorders.
	module + "source/sourcetest",
	// Faults planted in the assembly for the self-test.
	module + "internal/faults",
}

type pkg struct {
	ImportPath string
	Deps       []string
}

// TestImportRules fails when a package imports what docs/architecture.md
// says it must never import.
func TestImportRules(t *testing.T) {
	cmd := exec.Command("go", "list", "-json=ImportPath,Deps", module+"...")
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
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages: the test would check nothing", len(pkgs))
	}
	checked := map[string]int{}
	for _, p := range pkgs {
		rel := strings.TrimPrefix(p.ImportPath, module)
		if slices.Contains(exempt, p.ImportPath) {
			continue
		}
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
					if under(d, f) && !under(d, r.pkg) {
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

// under reports whether the package path rel is prefix or below it; a
// prefix ending in "/" matches only below it.
func under(rel, prefix string) bool {
	if strings.HasSuffix(prefix, "/") {
		return strings.HasPrefix(rel, prefix)
	}
	return rel == prefix || strings.HasPrefix(rel, prefix+"/")
}
