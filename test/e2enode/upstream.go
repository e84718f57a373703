package e2enode

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Focus selects upstream's specs of the Kubelet Pods API.
const Focus = "Kubelet Pods API"

// runTimeout bounds one run of upstream's tests (about 2-4 minutes).
const runTimeout = 20 * time.Minute

// Spec is the outcome of one of upstream's specs, from its JUnit report.
type Spec struct {
	// Name is the spec's full text, such as "[It] [sig-node] Kubelet Pods
	// API [Serial] when the PodsAPI feature gate is enabled should ...".
	Name string
	// State is ginkgo's: passed, failed, skipped, pending, panicked,
	// interrupted, aborted or timedout.
	State string
	// Failure is the failure's message, empty when the spec passed.
	Failure string
}

// Failed reports whether the spec ran and did not pass.
func (s Spec) Failed() bool {
	return s.State != "passed" && s.State != "skipped" && s.State != "pending"
}

// Result is what a run of upstream's tests found.
type Result struct {
	// Specs are the specs that ran (not skipped), setup nodes included.
	Specs []Spec
	// Summary is the end of ginkgo's own output: its summary of failures
	// and its "Ran N of M Specs" lines.
	Summary string
	// Err is the test binary's exit error (nil when every spec passed).
	Err error
}

// RunUpstream runs upstream's e2e_node.test (in the directory E2EBinEnv
// names) with --ginkgo.focus Focus against the node's API server, in
// n.Dir, with the shims on its PATH, and writes its output to logPath.
func (n *Node) RunUpstream(ctx context.Context, logPath string) (*Result, error) {
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	bin := filepath.Join(os.Getenv(E2EBinEnv), "e2e_node.test")
	junit := filepath.Join(n.Dir, "junit.xml")
	args := []string{
		"--ginkgo.focus", Focus,
		"--ginkgo.no-color",
		"--ginkgo.junit-report", junit,
		"--start-services=false", "--stop-services=false", "--prepull-images=false",
		"--host", "https://" + n.ControlPlane.Host(),
		"--bearer-token", n.ControlPlane.AdminConfig.BearerToken,
	}
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	var tail tailBuffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = n.Dir
	cmd.Env = n.Env()
	cmd.Stdout = io.MultiWriter(lf, &tail)
	cmd.Stderr = cmd.Stdout
	cmd.WaitDelay = 30 * time.Second
	runErr := cmd.Run()
	r := &Result{Err: runErr, Summary: summary(tail.String())}
	specs, err := readJUnit(junit)
	if err != nil {
		return r, fmt.Errorf("e2enode: %s wrote no report (%v): %w\n%s", bin, runErr, err, r.Summary)
	}
	r.Specs = specs
	return r, nil
}

// summaryStart finds where ginkgo's summary begins.
var summaryStart = regexp.MustCompile(`(?m)^(Summarizing \d+ Failures?:|Ran \d+ of \d+ Specs)`)

// summary returns the end of ginkgo's output, from its summary on.
func summary(out string) string {
	if loc := summaryStart.FindStringIndex(out); loc != nil {
		return strings.TrimSpace(out[loc[0]:])
	}
	return strings.TrimSpace(out[max(0, len(out)-2048):])
}

// tailBuffer keeps the last 64 KiB written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if over := len(t.b) - 64<<10; over > 0 {
		t.b = t.b[over:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }

// junitSuites is the part of ginkgo's JUnit report read here.
type junitSuites struct {
	Suites []struct {
		Cases []struct {
			Name    string `xml:"name,attr"`
			Status  string `xml:"status,attr"`
			Failure *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// readJUnit returns the specs of a ginkgo JUnit report that were not
// skipped.
func readJUnit(path string) ([]Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s junitSuites
	if err := xml.NewDecoder(bytes.NewReader(b)).Decode(&s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var specs []Spec
	for _, suite := range s.Suites {
		for _, c := range suite.Cases {
			if c.Status == "skipped" || c.Status == "pending" {
				continue
			}
			sp := Spec{Name: c.Name, State: c.Status}
			switch {
			case c.Failure != nil:
				sp.Failure = strings.TrimSpace(c.Failure.Message + "\n" + c.Failure.Text)
			case c.Error != nil:
				sp.Failure = c.Error.Message
			}
			specs = append(specs, sp)
		}
	}
	return specs, nil
}
