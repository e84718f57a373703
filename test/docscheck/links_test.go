package docscheck

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// fragments are the directories whose Markdown files are parts of another
// file (test/bench's are embedded in docs/benchmarks.md, where
// their links resolve and are checked).
var fragments = []string{"test/bench"}

// markdownFiles returns the Markdown files of the repository at root,
// relative to it, outside build outputs, dependencies and fragments.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel, _ := filepath.Rel(root, path); slices.Contains(fragments, rel) {
				return filepath.SkipDir
			}
			switch d.Name() {
			case ".git", "node_modules", "bin", "build", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var (
	// linkRE matches an inline Markdown link or image: its target, without
	// a title.
	linkRE = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// codeRE matches inline code, whose brackets are not links.
	codeRE = regexp.MustCompile("`[^`]*`")
	// headingRE matches an ATX heading.
	headingRE = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	// anchorRE matches an explicit anchor of HTML.
	anchorRE = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// prose returns the lines of a Markdown file outside fenced code blocks,
// numbered from 1 (a fenced line is returned empty).
func prose(text string) []string {
	lines := strings.Split(text, "\n")
	fenced := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			lines[i] = ""
			continue
		}
		if fenced {
			lines[i] = ""
		}
	}
	return lines
}

// anchors returns the anchors GitHub gives the headings of a Markdown text
// (and its explicit HTML anchors).
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range prose(text) {
		for _, m := range anchorRE.FindAllStringSubmatch(l, -1) {
			out[m[1]] = true
		}
		m := headingRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		slug := slugify(m[1])
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// slugify returns GitHub's anchor of a heading: the text of its links and
// code, lower case, without punctuation but hyphens and underscores,
// spaces turned into hyphens.
func slugify(heading string) string {
	heading = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestLinks checks every relative link of the repository's Markdown: the
// file or directory it names exists, and its #anchor is a heading of the
// Markdown file it points into (or of the same file).
func TestLinks(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cache := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := cache[path]; ok {
			return a, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		cache[path] = anchors(string(b))
		return cache[path], nil
	}
	files := markdownFiles(t, root)
	if len(files) < 10 {
		t.Fatalf("found only %d Markdown files under %s", len(files), root)
	}
	checked := 0
	for _, file := range files {
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range prose(string(b)) {
			for _, m := range linkRE.FindAllStringSubmatch(codeRE.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				path, anchor, _ := strings.Cut(target, "#")
				full := filepath.Join(root, file)
				if path != "" {
					full = filepath.Join(filepath.Dir(full), path)
				}
				if _, err := os.Stat(full); err != nil {
					t.Errorf("%s:%d: link %s: %v", file, n+1, target, err)
					continue
				}
				if anchor == "" || !strings.HasSuffix(full, ".md") {
					continue
				}
				a, err := anchorsOf(full)
				if err != nil {
					t.Fatal(err)
				}
				if !a[anchor] {
					t.Errorf("%s:%d: link %s: no heading of %s has the anchor #%s", file, n+1, target, filepath.Base(full), anchor)
				}
			}
		}
	}
	t.Logf("%d relative links checked in %d files", checked, len(files))
}

// TestSlugify pins GitHub's anchors of headings such as the docs have.
func TestSlugify(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Who is who", "who-is-who"},
		{"RBAC: nodes/pods, not nodes/proxy", "rbac-nodespods-not-nodesproxy"},
		{"In a cluster: `deploy/`", "in-a-cluster-deploy"},
		{"Selectors and watch resume", "selectors-and-watch-resume"},
		{"Pod source: the API server", "pod-source-the-api-server"},
	} {
		if got := slugify(tc.heading); got != tc.want {
			t.Errorf("slugify(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}
