package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/podsapi/podsapi/conformance"
	"github.com/podsapi/podsapi/test/testimpl"
)

func run(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	err := Run(ctx, args, &out, &errb)
	if err != nil {
		errb.WriteString(err.Error() + "\n")
	}
	t.Logf("podsapi-conformance %s:\n%s%s", strings.Join(args, " "), out.String(), errb.String())
	return ExitCode(err), out.String() + errb.String()
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const testFeatures = "rateLimit: {qps: 100, burst: 10}\nwatchQueue: 16\nreflection: true\nhealth: true\n"

func TestList(t *testing.T) {
	code, out := run(t, "--list")
	if code != 0 || !strings.Contains(out, "ListPods/FieldMask/InvalidPath\n") {
		t.Fatalf("--list: exit %d", code)
	}
	md := filepath.Join(t.TempDir(), "CASES.md")
	if code, _ := run(t, "--list", "--markdown", "--output", md); code != 0 {
		t.Fatalf("--list --markdown: exit %d", code)
	}
	got, _ := os.ReadFile(md)
	want, _ := os.ReadFile("../../conformance/CASES.md")
	if !bytes.Equal(got, want) {
		t.Fatalf("--list --markdown differs from conformance/CASES.md: run go generate ./conformance")
	}
}

func TestUsageErrors(t *testing.T) {
	features := writeTemp(t, "f.yaml", "rateLimit: {qps: -1}\n")
	unknown := writeTemp(t, "f.yaml", "noSuchFeature: true\n")
	for _, args := range [][]string{
		{"--no-such-flag"},
		{},
		{"--endpoint", "/x.sock", "--run", "("},
		{"--endpoint", "/x.sock", "--features", features},
		{"--endpoint", "/x.sock", "--features", unknown},
		{"--endpoint", "/x.sock", "--known-failing", "/no/such/file"},
		{"--endpoint", "/x.sock", "extra"},
	} {
		if code, _ := run(t, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

func TestUnreachable(t *testing.T) {
	dir := t.TempDir()
	code, out := run(t, "--endpoint", "unix://"+dir+"/none.sock", "--start-timeout", "200ms")
	if code != 2 || !strings.Contains(out, "reachable") {
		t.Fatalf("exit %d, want 2 (harness error)", code)
	}
	// A server command that exits at once is a harness error too.
	if code, _ := run(t, "--server-cmd", "exit 3", "--start-timeout", "10s"); code != 2 {
		t.Fatalf("--server-cmd 'exit 3': exit %d, want 2", code)
	}
}

func TestExitCodesAndReports(t *testing.T) {
	features := writeTemp(t, "features.yaml", testFeatures)
	good := testimpl.Start(t, testimpl.None)
	bad := testimpl.Start(t, testimpl.UnknownForMissing)
	args := func(im *testimpl.Impl, more ...string) []string {
		return append([]string{"--endpoint", "unix://" + im.Socket, "--manifest-dir", im.ManifestDir,
			"--metrics-url", im.MetricsURL, "--features", features, "--run", "^GetPod/(UnknownUID|EmptyUID|Pod)$"}, more...)
	}
	dir := t.TempDir()
	junit, js := filepath.Join(dir, "r.xml"), filepath.Join(dir, "r.json")
	if code, _ := run(t, args(good, "--junit", junit, "--json", js, "-v")...); code != 0 {
		t.Fatalf("good implementation: exit %d, want 0", code)
	}
	code, out := run(t, args(bad, "--junit", junit, "--json", js)...)
	if code != 1 {
		t.Fatalf("broken implementation: exit %d, want 1", code)
	}
	for _, want := range []string{"FAILED        GetPod/UnknownUID", "expected: NOT_FOUND", "seen:     UNKNOWN", "--run '^GetPod/UnknownUID$'", conformance.Banner()} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	var rep conformance.Report
	data, _ := os.ReadFile(js)
	if err := json.Unmarshal(data, &rep); err != nil || rep.SuiteVersion != conformance.Version || len(rep.Results) != 3 {
		t.Fatalf("--json: %v %+v", err, rep)
	}
	if res, _ := rep.Result("GetPod/UnknownUID"); res.Status != conformance.Failed {
		t.Errorf("--json: GetPod/UnknownUID %s", res.Status)
	}
	var suites struct {
		Suites []struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
			Cases    []struct {
				Name    string    `xml:"name,attr"`
				Failure *struct{} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	data, _ = os.ReadFile(junit)
	if err := xml.Unmarshal(data, &suites); err != nil || len(suites.Suites) != 1 || suites.Suites[0].Tests != 3 || suites.Suites[0].Failures != 1 {
		t.Fatalf("--junit: %v %+v", err, suites)
	}

	// Known failing: a listed case that fails passes the run, a listed
	// case that passes fails it.
	kf := writeTemp(t, "known", "# broken on purpose\nGetPod/UnknownUID  # UNKNOWN instead of NOT_FOUND\n\n")
	if code, _ := run(t, args(bad, "--known-failing", kf)...); code != 0 {
		t.Errorf("known failure: exit %d, want 0", code)
	}
	if code, out := run(t, args(good, "--known-failing", kf)...); code != 1 || !strings.Contains(out, "listed as known failing but passed") {
		t.Errorf("known-failing case that passes: exit %d, want 1", code)
	}
}

// TestServerCmd runs the whole suite against podsapi-server, started and
// restarted by the runner.
func TestServerCmd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs podsapi-server")
	}
	bin := filepath.Join(t.TempDir(), "podsapi-server")
	build := exec.Command("go", "build", "-o", bin, "../podsapi-server")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	server := bin + " --socket {socket} --manifest-dir {manifests} --metrics-address {metrics} --watch-queue 16 --log-level warn"
	t.Run("podsapi", func(t *testing.T) {
		if code, _ := run(t, "--server-cmd", server, "--features", "../../conformance/features/podsapi-server.yaml"); code != 0 {
			t.Fatalf("exit %d, want 0", code)
		}
	})
	t.Run("kubelet", func(t *testing.T) {
		code, _ := run(t, "--wire", "kubelet", "--server-cmd", server,
			"--features", "../../conformance/features/podsapi-server-kubelet.yaml",
			"--known-failing", "../../conformance/features/podsapi-server-kubelet.known-failing")
		if code != 0 {
			t.Fatalf("exit %d, want 0", code)
		}
	})
}

// TestWire judges the kubelet wire of the in-process implementation, and
// a fault of that wire.
func TestWire(t *testing.T) {
	features := writeTemp(t, "features.yaml", testFeatures)
	for _, tc := range []struct {
		brk  testimpl.Break
		code int
		want string
	}{
		{testimpl.None, 0, "PASSED        GetPod/UnknownUID"},
		{testimpl.UnknownForMissing, 1, "seen:     UNKNOWN"},
	} {
		im := testimpl.Start(t, tc.brk)
		code, out := run(t, "--wire", "kubelet", "--endpoint", "unix://"+im.Socket, "--manifest-dir", im.ManifestDir,
			"--features", features, "--run", "^GetPod/(Pod|UnknownUID)$")
		if code != tc.code || !strings.Contains(out, tc.want) || !strings.Contains(out, "checking v1alpha1.Pods") {
			t.Errorf("%s: exit %d, want %d with %q", tc.brk, code, tc.code, tc.want)
		}
	}
	if code, _ := run(t, "--wire", "grpc", "--endpoint", "/x.sock"); code != 2 {
		t.Errorf("--wire grpc: exit %d, want 2", code)
	}
}

// TestEndsWithoutSyncMarker runs the whole suite, with the default
// timeouts, against an implementation that never sends
// INITIAL_SYNC_COMPLETE: it exits 1 well within a minute (it ran for more
// than 300 s, each case waiting for the marker in turn), and the output
// names the marker.
func TestEndsWithoutSyncMarker(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the default event timeout once")
	}
	features := writeTemp(t, "features.yaml", testFeatures)
	im := testimpl.Start(t, testimpl.NoSyncMarker)
	begin := time.Now()
	code, out := run(t, "--endpoint", "unix://"+im.Socket, "--manifest-dir", im.ManifestDir, "--metrics-url", im.MetricsURL, "--features", features)
	took := time.Since(begin)
	t.Logf("the run took %s", took.Round(time.Millisecond))
	if code != 1 || !strings.Contains(out, "no EVENT_TYPE_INITIAL_SYNC_COMPLETE") {
		t.Errorf("exit %d, want 1 naming the sync marker", code)
	}
	if took > 55*time.Second {
		t.Errorf("the run took %s, want well under a minute", took.Round(time.Millisecond))
	}
}
