package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommandLine runs the built command as a user does: --help and -h of
// the server and of probe print the usage with two-dash flags on stdout and
// exit 0; an error in the command line prints the error and a one-line
// hint, not the usage, and exits 2; the deprecated names still work.
func TestCommandLine(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "podsapi-server")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		name       string
		args       []string
		code       int
		stdout     []string // each must be in stdout
		stderr     string   // stderr, exactly
		stderrHas  string   // or a part of it
		notInUsage string
	}{
		{name: "help", args: []string{"--help"}, stdout: []string{"Usage: podsapi-server", "      --socket string", "      --qps float", "      --manifest-dir string", "      --source string"}, notInUsage: "\n  -socket"},
		{name: "h", args: []string{"-h"}, stdout: []string{"Usage: podsapi-server", "      --socket string"}},
		{name: "probe help", args: []string{"probe", "--help"}, stdout: []string{"Usage: podsapi-server probe", "      --serving", "      --timeout duration"}, notInUsage: "\n  -serving"},
		{name: "not a number", args: []string{"--qps", "abc"}, code: 2,
			stderr: "podsapi-server: invalid argument \"abc\" for \"--qps\" flag: strconv.ParseFloat: parsing \"abc\": invalid syntax\nRun 'podsapi-server --help' for the flags.\n"},
		{name: "unknown flag", args: []string{"--bogus"}, code: 2,
			stderr: "podsapi-server: unknown flag: --bogus\nRun 'podsapi-server --help' for the flags.\n"},
		{name: "probe unknown flag", args: []string{"probe", "--bogus"}, code: 2,
			stderr: "podsapi-server: unknown flag: --bogus\nRun 'podsapi-server probe --help' for the flags.\n"},
		{name: "deprecated name", args: []string{"--max-watchers-per-uid", "5", "--version"}, stdout: []string{"podsapi-server "},
			stderrHas: "--max-watchers-per-uid has been deprecated, use --max-watchers-per-client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code {
				t.Errorf("exit status %d, want %d; stderr:\n%s", code, tc.code, stderr.String())
			}
			for _, w := range tc.stdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout.String())
				}
			}
			if tc.notInUsage != "" && strings.Contains(stdout.String(), tc.notInUsage) {
				t.Errorf("stdout has a one-dash flag %q:\n%s", tc.notInUsage, stdout.String())
			}
			switch {
			case tc.stderrHas != "":
				if !strings.Contains(stderr.String(), tc.stderrHas) {
					t.Errorf("stderr lacks %q:\n%s", tc.stderrHas, stderr.String())
				}
			case stderr.String() != tc.stderr:
				t.Errorf("stderr:\n%q\nwant\n%q", stderr.String(), tc.stderr)
			}
		})
	}
}
