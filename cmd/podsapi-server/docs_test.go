package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/spf13/pflag"

	"github.com/podsapi/podsapi/kubeapi"
	"github.com/podsapi/podsapi/kubeapi/door"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/source"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
	"github.com/podsapi/podsapi/workload"
)

// The tables of the documentation that the code defines are written from
// it, between the markers of a block, by these tests with -update:
//
//	go test ./cmd/podsapi-server -run TestDocs -update   (make docs)
//
// Without -update they fail when a table differs from what the code
// defines, so that make test (CI) catches a flag or a metric added, renamed
// or changed without its documentation.
var update = flag.Bool("update", false, "rewrite the generated blocks of docs/ (make docs)")

// regenerate is the command that rewrites the blocks, named in their markers.
const regenerate = "make docs"

// TestDocsFlagsTable checks the flags table of docs/server.md against the
// flag set of the server: every flag but the deprecated ones, its default,
// and its help.
func TestDocsFlagsTable(t *testing.T) {
	var fs *pflag.FlagSet
	flagsDefined = func(f *pflag.FlagSet) { fs = f }
	defer func() { flagsDefined = nil }()
	if err := Run(context.Background(), nil, io.Discard, io.Discard); err != nil || fs == nil {
		t.Fatalf("Run with flagsDefined: %v", err)
	}
	// The defaults that depend on the machine the table is written on.
	machine := map[string]string{
		"node-name":    "the host name",
		"allowed-uids": "root (`0`) and the server's own UID",
	}
	var b strings.Builder
	b.WriteString("| Flag | Default | Meaning |\n|---|---|---|\n")
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Deprecated != "" {
			return
		}
		def := "`" + f.DefValue + "`"
		switch {
		case machine[f.Name] != "":
			def = machine[f.Name]
		case f.DefValue == "" || f.DefValue == "[]":
			def = "none"
		}
		if f.Value.Type() == "bool" && f.DefValue == "false" {
			def = "`false`"
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s |\n", f.Name, def, cell(f.Usage))
	})
	checkBlock(t, "../../docs/server.md", "flags", b.String())
}

// TestDocsMetricsTable checks the metrics table of docs/metrics.md against
// the collectors the server registers (server.New) and those of every pod
// source, as Run registers them: name, type, labels and help. The Go and
// process collectors are left out.
func TestDocsMetricsTable(t *testing.T) {
	reg := prometheus.NewRegistry()
	dir := t.TempDir()
	env := source.Env{NodeName: "node-1", Socket: filepath.Join(dir, "other.sock"), Logger: slog.New(slog.DiscardHandler), Registerer: reg}
	for _, r := range sources {
		fs := flag.NewFlagSet(r.Name, flag.ContinueOnError)
		mk := r.Flags(fs)
		if fs.Lookup("manifest-dir") != nil {
			if err := fs.Set("manifest-dir", dir); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := mk(env); err != nil {
			t.Fatalf("source %s: %v", r.Name, err)
		}
	}
	// An NRI socket nobody serves: the observer's metrics are registered,
	// and it retries in the background until the server stops.
	st := store.New()
	podstest.Start(t, st, server.Config{Registry: reg, Metrics: server.MetricsConfig{Address: "127.0.0.1:0"}, NRISocket: filepath.Join(dir, "nri.sock")})
	// The workload resolution's, as --workloads and the node view register
	// them.
	workload.NewResolver(workload.WithRegisterer(reg), workload.WithSlice())
	// The front door's, as --kube-api-address registers them.
	door.New(kubeapi.New(st, "node-1"), door.WithRegisterer(reg))
	// Its connections' and stalls', as its listeners register them.
	kube, err := door.Listen(door.Config{Socket: filepath.Join(dir, "kube.sock"), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	kube.Close()
	// The types of the families with series; the others follow the naming
	// rule below.
	types := map[string]string{}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		types[mf.GetName()] = strings.ToLower(mf.GetType().String())
	}

	type metric struct{ name, typ, labels, help string }
	metrics := map[string]*metric{}
	descs := make(chan *prometheus.Desc, 1000)
	reg.Describe(descs)
	close(descs)
	descRE := regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"), .*constLabels: \{(.*)\}, variableLabels: \{([^}]*)\}\}$`)
	constRE := regexp.MustCompile(`(\w+)="(?:[^"\\]|\\.)*"`)
	for d := range descs {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read %s", d)
		}
		name, _ := strconv.Unquote(m[1])
		help, _ := strconv.Unquote(m[2])
		var labels []string
		for _, c := range constRE.FindAllStringSubmatch(m[3], -1) {
			labels = append(labels, "`"+c[1]+"`")
		}
		for l := range strings.SplitSeq(m[4], ",") {
			if l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"); l != "" {
				labels = append(labels, "`"+l+"`")
			}
		}
		// The type of a metric without series yet (a vector nobody
		// counted in) follows the naming rule: counters end in _total.
		typ := "gauge"
		if strings.HasSuffix(name, "_total") {
			typ = "counter"
		}
		if known, ok := types[name]; ok {
			typ = known
		}
		// A family registered once per value of a constant label (kind)
		// is described once per value: one row.
		metrics[name] = &metric{name: name, typ: typ, labels: strings.Join(labels, ", "), help: help}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		m := metrics[mf.GetName()]
		if m == nil {
			continue
		}
		typ := strings.ToLower(mf.GetType().String())
		if mf.GetType() != dto.MetricType_COUNTER && mf.GetType() != dto.MetricType_GAUGE {
			m.typ = typ
			continue
		}
		if typ != m.typ {
			t.Errorf("%s is a %s: the name of a counter ends in _total, and only its", m.name, typ)
		}
	}
	names := make([]string, 0, len(metrics))
	for n := range metrics {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString("| Metric | Type | Labels | Meaning |\n|---|---|---|---|\n")
	for _, n := range names {
		m := metrics[n]
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", m.name, m.typ, m.labels, cell(m.help))
	}
	checkBlock(t, "../../docs/metrics.md", "metrics", b.String())
}

// TestDocsImageContents checks the list of the image's files in
// docs/server.md against the commands make image-bin builds for it.
func TestDocsImageContents(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	_, target, ok := bytes.Cut(mk, []byte("\nimage-bin: "))
	if !ok {
		t.Fatal("the Makefile has no image-bin target")
	}
	target, _, _ = bytes.Cut(target, []byte("\n\n"))
	var files []string
	for _, m := range regexp.MustCompile(`\./cmd/([a-z-]+)`).FindAllSubmatch(target, -1) {
		f := "`/" + string(m[1]) + "`"
		if string(m[1]) == "podsapi-server" {
			f += " (the entry point)"
		}
		if !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	if len(files) < 2 {
		t.Fatalf("found %q in the image-bin target", files)
	}
	text := "Each image is an empty base plus " + strings.Join(files[:len(files)-1], ", ") + " and " + files[len(files)-1] + "."
	checkBlock(t, "../../docs/server.md", "image", text+"\n")
}

// cell returns s for a cell of a Markdown table.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// checkBlock compares the generated block name of file with want, or
// rewrites it with -update. A block is the lines between
// "<!-- BEGIN name ... -->" and "<!-- END name -->".
func checkBlock(t *testing.T, file, name, want string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	begin := fmt.Sprintf("<!-- BEGIN %s: generated by %s from the code; do not edit -->\n", name, regenerate)
	end := fmt.Sprintf("<!-- END %s -->", name)
	i := bytes.Index(b, []byte(begin))
	j := bytes.Index(b, []byte(end))
	if i < 0 || j < i {
		t.Fatalf("%s has no block %q...%q", file, strings.TrimSpace(begin), end)
	}
	got := string(b[i+len(begin) : j])
	if got == want {
		return
	}
	if *update {
		out := append(append(slices.Clip(b[:i+len(begin)]), want...), b[j:]...)
		if err := os.WriteFile(file, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the %s block of %s differs from the code: run %s\n got:\n%s\nwant:\n%s", name, file, regenerate, got, want)
}
