package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// serverBinary is the podsapi-server built once by TestMain.
var serverBinary string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "e2ebin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	serverBinary = filepath.Join(dir, "podsapi-server")
	build := exec.Command("go", "build", "-o", serverBinary, "github.com/podsapi/podsapi/cmd/server")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build podsapi-server:", err)
		return 1
	}
	return m.Run()
}

// node is a podsapi-server child process serving a manifest directory.
type node struct {
	Socket    string
	Manifests string
}

// startServer runs podsapi-server on a fresh socket and manifest directory
// holding the given files, with extra flags, and waits until its health
// service says SERVING (the sources have synced). It is stopped with SIGTERM
// at the end of the test, and must exit 0.
func startServer(t *testing.T, files map[string]string, flags ...string) *node {
	t.Helper()
	dir, err := os.MkdirTemp("", "e2e")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	n := &node{Socket: filepath.Join(dir, "pods.sock"), Manifests: filepath.Join(dir, "manifests")}
	if err := os.Mkdir(n.Manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		n.write(t, name, content)
	}
	var stderr bytes.Buffer
	args := append([]string{"--socket", n.Socket, "--manifest-dir", n.Manifests, "--metrics-address", "", "--node-name", "node-1", "--log-level", "warn"}, flags...)
	cmd := exec.Command(serverBinary, args...)
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("podsapi-server: %v\n%s", err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
			t.Errorf("podsapi-server did not exit within 30 s of SIGINT\n%s", stderr.String())
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn := dial(t, n.Socket)
	// The socket appears once the server listens: wait for it with the
	// health service's Watch, which retries the connection, then streams
	// NOT_SERVING until the sources have synced.
	for {
		stream, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
		if err == nil {
			for {
				resp, err := stream.Recv()
				if err != nil {
					break
				}
				if resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
					return n
				}
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("podsapi-server exited: %v\n%s", err, stderr.String())
		case <-ctx.Done():
			t.Fatalf("podsapi-server not SERVING within 30 s\n%s", stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// write writes a manifest atomically (a rename), as editors and
// configuration tools do.
func (n *node) write(t *testing.T, name, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(n.Manifests), name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(n.Manifests, name)); err != nil {
		t.Fatal(err)
	}
}

// dial returns a grpc-go connection to the socket, closed at the end of the
// test, able to receive large lists.
func dial(t *testing.T, socket string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// manifest returns a static pod manifest.
func manifest(namespace, name, uid, image string, labels ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: %s\n  uid: %s\n", name, namespace, uid)
	if len(labels) > 0 {
		b.WriteString("  labels:\n")
		for i := 0; i+1 < len(labels); i += 2 {
			fmt.Fprintf(&b, "    %s: %q\n", labels[i], labels[i+1])
		}
	}
	fmt.Fprintf(&b, "spec:\n  containers:\n  - name: main\n    image: %s\n", image)
	return b.String()
}
