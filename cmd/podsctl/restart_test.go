package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/podsapi/podsapi/server"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/childproc"
	"github.com/podsapi/podsapi/test/podstest"
)

// lockedBuffer is a bytes.Buffer safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startWatch runs podsctl watch with args in the background until the end
// of the test, and returns its stdout writes and its stderr.
func startWatch(t *testing.T, args ...string) (writes, *lockedBuffer) {
	t.Helper()
	out, stderr := make(writes, 100), new(lockedBuffer)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, append([]string{"watch"}, args...), out, stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("watch ended with %v after cancellation, want nil", err)
			}
		case <-time.After(testTimeout):
			t.Error("watch did not end after cancellation")
		}
	})
	return out, stderr
}

// readUntil returns what podsctl printed until it printed every line of want.
func readUntil(t *testing.T, out writes, want ...string) string {
	t.Helper()
	var got strings.Builder
	for {
		missing := false
		for _, w := range want {
			if !strings.Contains(got.String(), w+"\n") {
				missing = true
			}
		}
		if !missing {
			return got.String()
		}
		got.WriteString(out.next(t))
	}
}

// writeManifest writes a pod manifest of name to dir, as an editor that
// renames a temporary file into place.
func writeManifest(t *testing.T, dir, name, image string) {
	t.Helper()
	y := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: default\nspec:\n  containers:\n  - name: c\n    image: %s\n", name, image)
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name+".yaml")); err != nil {
		t.Fatal(err)
	}
}

// TestWatchSurvivesServerRestart runs podsctl watch over a real
// podsapi-server, built from ../podsapi-server and fed by a manifest
// directory, stops the server (SIGTERM: its watches end UNAVAILABLE),
// changes the pods while it is down, and starts it again: podsctl carries
// on, printing what changed meanwhile (the new server cannot resume: its
// revisions are another instance's) and no pod twice, then live changes.
func TestWatchSurvivesServerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs podsapi-server")
	}
	bin := filepath.Join(t.TempDir(), "podsapi-server")
	if err := childproc.Build(t.Context(), "", bin, "../podsapi-server"); err != nil {
		t.Fatal(err)
	}
	manifests, socket := t.TempDir(), podstest.SocketPath(t)
	writeManifest(t, manifests, "a", "busybox:1")
	writeManifest(t, manifests, "b", "busybox:1")
	serverLog := new(lockedBuffer)
	start := func() (stop func()) {
		cmd := exec.Command(bin, "--socket", socket, "--manifest-dir", manifests, "--metrics-address", "",
			"--node-name", "node-1", "--log-level", "warn")
		cmd.Stdout, cmd.Stderr = serverLog, serverLog
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waited := make(chan error, 1)
		go func() { waited <- cmd.Wait() }()
		stopped := false
		stop = func() {
			if stopped {
				return
			}
			stopped = true
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case err := <-waited:
				if err != nil {
					t.Errorf("podsapi-server: %v\n%s", err, serverLog)
				}
			case <-time.After(testTimeout):
				_ = cmd.Process.Kill()
				<-waited
				t.Errorf("podsapi-server did not stop within %v", testTimeout)
			}
		}
		t.Cleanup(stop)
		return stop
	}
	stop := start()

	// podsctl fails at once when the server is not there yet: wait for it.
	deadline := time.Now().Add(testTimeout)
	for {
		if _, _, code := run(t, "list", "--socket", socket); code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("podsapi-server did not serve within %v:\n%s", testTimeout, serverLog)
		}
		time.Sleep(50 * time.Millisecond) // polling a child process's readiness, not synchronising goroutines
	}
	out, stderr := startWatch(t, "--socket", socket, "-o", "name")
	got := readUntil(t, out, "ADDED pod/a", "ADDED pod/b", "SYNCED")

	stop()
	writeManifest(t, manifests, "c", "busybox:1")
	if err := os.Remove(filepath.Join(manifests, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	start()
	after := readUntil(t, out, "DELETED pod/b", "ADDED pod/c")
	writeManifest(t, manifests, "a", "busybox:2")
	after += readUntil(t, out, "MODIFIED pod/a")
	if want := "DELETED pod/b\nADDED pod/c\nMODIFIED pod/a\n"; after != want {
		t.Errorf("after the restart podsctl printed\n%s\nwant\n%s(before it: %q)", after, want, got)
	}
	for _, want := range []string{"UNAVAILABLE", "watching again", "resynced"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr %q does not say %q", stderr, want)
		}
	}
}

// TestWatchResumes stops the server under podsctl watch and starts another
// on the same store, as a server whose store outlives its socket: podsctl
// resumes from the last revision it was sent and prints exactly the changes
// made while it was away.
func TestWatchResumes(t *testing.T) {
	pods := testPods()[:3]
	st := store.New()
	for _, p := range pods {
		st.Upsert(p)
	}
	st.MarkSynced()
	socket := podstest.SocketPath(t)
	serve := func() (stop func()) {
		return podstest.Serve(t, st, server.Config{Socket: socket, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}).Stop
	}
	stop := serve()
	out, stderr := startWatch(t, "--socket", socket, "-o", "name")
	readUntil(t, out, "ADDED pod/"+pods[0].Name, "SYNCED")

	stop()
	changed := pods[0].DeepCopy()
	changed.ResourceVersion = "2"
	changed.Status.ContainerStatuses[0].RestartCount = 1
	st.Upsert(changed)
	st.Delete(pods[1].UID)
	st.Upsert(podstest.Pod("default", "new", 9))
	serve()
	got := readUntil(t, out, "MODIFIED pod/"+pods[0].Name, "DELETED pod/"+pods[1].Name, "ADDED pod/new")
	if want := fmt.Sprintf("MODIFIED pod/%s\nDELETED pod/%s\nADDED pod/new\n", pods[0].Name, pods[1].Name); got != want {
		t.Errorf("after the restart podsctl printed\n%s\nwant\n%s", got, want)
	}
	for _, want := range []string{"UNAVAILABLE", "resuming from revision", "resumed"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr %q does not say %q", stderr, want)
		}
	}
	if strings.Contains(stderr.String(), "resynced") {
		t.Errorf("stderr %q: podsctl did not resume", stderr)
	}
}
