package docscheck

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/client"
	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/source/manifest"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/podstest"
)

// selection is what a snippet of the documentation asks for: the pods of a
// namespace, label and field selector, or one pod by NAMESPACE/NAME or UID.
type selection struct {
	where                    string // file:line
	snippet                  string
	namespace, labels, field string
	ref                      string // podsctl get's argument
}

var (
	// podsctlRE matches a podsctl command that lists, watches or gets pods.
	podsctlRE = regexp.MustCompile(`podsctl\s+(?:--socket\s+\S+\s+)?(list|watch|get)\b([^#\n]*)`)
	// goSelRE matches a selection option of the Go client.
	goSelRE = regexp.MustCompile(`client\.With(Namespace|LabelSelector|FieldSelector)\("([^"]*)"\)`)
	// grpcurlDataRE matches the request of a grpcurl command.
	grpcurlDataRE = regexp.MustCompile(`grpcurl\s.*-d\s+'([^']*)'`)
	// placeholderRE matches a value the reader replaces (NAMESPACE, UID).
	placeholderRE = regexp.MustCompile(`^[A-Z][A-Z_/|.]*$|^<.*>$`)
)

// snippets returns the selections of the README's and docs/'s code: fenced
// blocks, and inline code that is a podsctl command.
func snippets(t *testing.T, root string) []selection {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	var out []selection
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, file)
		fenced := false
		for n, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fenced = !fenced
				continue
			}
			where := rel + ":" + itoa(n+1)
			pieces := []string{line}
			if !fenced {
				pieces = nil
				for _, c := range codeRE.FindAllString(line, -1) {
					pieces = append(pieces, strings.Trim(c, "`"))
				}
			}
			for _, p := range pieces {
				for _, m := range podsctlRE.FindAllStringSubmatch(p, -1) {
					if s, ok := podsctlSelection(m[1], m[2]); ok {
						s.where, s.snippet = where, strings.TrimSpace(m[0])
						out = append(out, s)
					}
				}
				if !fenced {
					continue
				}
				if ms := goSelRE.FindAllStringSubmatch(p, -1); ms != nil {
					s := selection{where: where, snippet: strings.TrimSpace(p)}
					for _, m := range ms {
						switch m[1] {
						case "Namespace":
							s.namespace = m[2]
						case "LabelSelector":
							s.labels = m[2]
						case "FieldSelector":
							s.field = m[2]
						}
					}
					out = append(out, s)
				}
				if m := grpcurlDataRE.FindStringSubmatch(p); m != nil {
					var req map[string]any
					if json.Unmarshal([]byte(m[1]), &req) != nil {
						continue
					}
					s := selection{where: where, snippet: strings.TrimSpace(p)}
					for k, v := range req {
						str, _ := v.(string)
						switch k {
						case "namespace":
							s.namespace = str
						case "label_selector", "labelSelector":
							s.labels = str
						case "field_selector", "fieldSelector":
							s.field = str
						}
					}
					if s != (selection{where: s.where, snippet: s.snippet}) {
						out = append(out, s)
					}
				}
			}
		}
	}
	return out
}

// podsctlSelection returns the selection of podsctl's command and
// arguments, or false when an argument is a placeholder.
func podsctlSelection(command, args string) (selection, bool) {
	var s selection
	words := splitWords(args)
	for i := 0; i < len(words); i++ {
		w := strings.Trim(words[i], "[]()") // a usage line's optional and alternative arguments
		name, value, hasValue := strings.Cut(w, "=")
		next := func() string {
			if hasValue {
				return value
			}
			if i+1 < len(words) {
				i++
				return strings.Trim(words[i], "[]()")
			}
			return ""
		}
		var v *string
		switch name {
		case "-n", "--namespace":
			v = &s.namespace
		case "-l", "--selector":
			v = &s.labels
		case "--field-selector":
			v = &s.field
		case "--fields", "-o", "--output", "--socket", "--wire":
			next()
			continue
		default:
			if !strings.HasPrefix(w, "-") && command == "get" && s.ref == "" {
				s.ref = w
				if placeholderRE.MatchString(w) || strings.HasPrefix(w, "(") {
					return s, false
				}
			}
			continue
		}
		*v = next()
		if placeholderRE.MatchString(*v) {
			return s, false
		}
	}
	if command == "get" && s.ref == "" {
		return s, false
	}
	return s, true
}

// splitWords splits a command line into words, as a shell does with quotes.
func splitWords(s string) []string {
	var words []string
	var cur strings.Builder
	var quote rune
	in := false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t' || r == '\\':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestSnippetsSelectExamplePods serves examples/manifests (what make run
// serves, and what the documentation's outputs show) and checks, through
// the real client, that every selection the README and docs/ show selects
// at least one of its pods, and that every pod podsctl get names exists.
func TestSnippetsSelectExamplePods(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	sels := snippets(t, root)
	if len(sels) < 3 {
		t.Fatalf("found only %d selections in the documentation: %+v", len(sels), sels)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := store.New()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	src := manifest.New(filepath.Join(root, "examples", "manifests"), "node-1", manifest.WithLogger(logger))
	srcCtx, stopSrc := context.WithCancel(ctx)
	srcDone := make(chan error, 1)
	go func() { srcDone <- src.Run(srcCtx, st) }()
	defer func() { stopSrc(); <-srcDone }()
	select {
	case <-st.SyncedC():
	case err := <-srcDone:
		t.Fatalf("manifest source: %v", err)
	case <-ctx.Done():
		t.Fatal("the example manifests did not sync within a minute")
	}
	srv := podstest.Start(t, st, server.Config{Logger: logger, Limits: server.LimitsConfig{QPS: -1, PerClientQPS: -1}})
	c, err := client.New(srv.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	for _, s := range sels {
		var pods []*corev1.Pod
		if s.ref != "" {
			all, err := c.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range all {
				if p.Namespace+"/"+p.Name == s.ref || string(p.UID) == s.ref {
					pods = append(pods, p)
				}
			}
		} else {
			pods, err = c.List(ctx, client.WithNamespace(s.namespace), client.WithLabelSelector(s.labels), client.WithFieldSelector(s.field))
			if err != nil {
				t.Errorf("%s: %s: %v", s.where, s.snippet, err)
				continue
			}
		}
		if len(pods) == 0 {
			t.Errorf("%s: %s selects none of the example pods (examples/manifests, what make run serves)", s.where, s.snippet)
		}
	}
	for _, s := range sels {
		t.Logf("%s: %s", s.where, s.snippet)
	}
	t.Logf("%d selections checked", len(sels))
}
