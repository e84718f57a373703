package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/podsapi/podsapi/internal/h2c"
	"github.com/podsapi/podsapi/test/childproc"
	"github.com/podsapi/podsapi/test/kubetest"
)

// The real podsapi-server of the node's-view measurement: the command a
// DaemonSet runs, built from this tree, with --source=apiserver and its
// front door on a free loopback port, so that what the API server serves
// it, what it serves the agents and its memory are the product's.

// envServerBin names a podsapi-server binary to run instead of building
// one (as the integrations' harness takes it).
const envServerBin = "PODSAPI_SERVER_BIN"

// doorAddressLog finds the front door's address in podsapi-server's log.
var doorAddressLog = regexp.MustCompile(`through the Kubernetes API" address=(\S+)`)

// podsapiServer is a running podsapi-server of one node.
type podsapiServer struct {
	node string
	addr string // The front door's host:port.
	ca   []byte // The CA of the door's serving certificate.
	proc *kubetest.Process
	// probe asks the server's health whether it is SERVING.
	probe func() error
}

// serverBinary returns envServerBin's binary, or builds podsapi-server
// into dir.
func serverBinary(t *testing.T, dir string) string {
	t.Helper()
	if bin := os.Getenv(envServerBin); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("%s=%s: %v", envServerBin, bin, err)
		}
		return bin
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	root, err := moduleRoot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "podsapi-server")
	if err := childproc.Build(ctx, root, bin, footprintPackage); err != nil {
		t.Fatal(err)
	}
	return bin
}

// startPodsapiServers starts a podsapi-server for each node, all at once,
// reading the API server through apiHost (a host:port reaching it, such as
// a counting Proxy) with kubeconfig user's identity, with extra args
// after the rig's own; it returns once each serves (its health says
// SERVING: its source has synced the node's pods). They are stopped at the
// end of the test, or earlier by stopPodsapiServers.
func startPodsapiServers(t *testing.T, bin string, cp *kubetest.ControlPlane, apiHost string, nodes []string, extra []string) []*podsapiServer {
	t.Helper()
	kubeconfig := cp.Kubeconfig(t, kubetest.AdminUser, apiHost)
	servers := make([]*podsapiServer, len(nodes))
	for i, node := range nodes {
		dir, err := os.MkdirTemp("", "nv") // Short: it holds UNIX sockets, whose paths are bounded.
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		cert, key, ca := kubetest.ServingCert(t, dir)
		sock := filepath.Join(dir, "p.sock")
		args := append([]string{"--source", "apiserver", "--node-name", node, "--kubeconfig", kubeconfig,
			"--socket", sock, "--metrics-address", "unix:" + filepath.Join(dir, "m.sock"),
			"--kube-api-address", "127.0.0.1:0", "--kube-api-tls-cert-file", cert, "--kube-api-tls-private-key-file", key}, extra...)
		proc, err := kubetest.StartProcess("podsapi-server "+node, bin, filepath.Join(dir, "podsapi-server.log"), args...)
		if err != nil {
			t.Fatal(err)
		}
		s := &podsapiServer{node: node, ca: ca, proc: proc}
		servers[i] = s
		t.Cleanup(func() {
			s.stop(t)
			if t.Failed() {
				t.Logf("podsapi-server of %s, its log's end:\n%s", node, proc.Tail())
			}
		})
		s.probe = func() error { return serving(sock) }
	}
	var wg sync.WaitGroup
	errs := make([]error, len(servers))
	for i, s := range servers {
		wg.Go(func() {
			errs[i] = s.proc.Await(func() error {
				m := doorAddressLog.FindStringSubmatch(s.proc.Log())
				if m == nil {
					return errors.New("the front door's address is not in the log yet")
				}
				s.addr = m[1]
				return s.probe()
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("podsapi-server of %s: %v\n%s", servers[i].node, err, servers[i].proc.Tail())
		}
	}
	return servers
}

// serving asks the gRPC health service of the server on the socket sock
// whether it is SERVING, as `podsapi-server probe --serving` does, in
// process: fifty servers starting at once are polled without fifty
// processes a poll.
func serving(sock string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hc := h2c.NewClient(h2c.SocketPath(sock))
	defer hc.CloseIdleConnections()
	client := connect.NewClient[healthpb.HealthCheckRequest, healthpb.HealthCheckResponse](
		hc, h2c.BaseURL+"/grpc.health.v1.Health/Check", connect.WithGRPC())
	resp, err := client.CallUnary(ctx, connect.NewRequest(&healthpb.HealthCheckRequest{}))
	if err != nil {
		return err
	}
	if st := resp.Msg.GetStatus(); st != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("health %v", st)
	}
	return nil
}

// stop stops s, and says so when it did not end cleanly.
func (s *podsapiServer) stop(t *testing.T) {
	if s.proc.Stop(t) > 0 {
		if err := s.proc.Err(); err != nil {
			t.Errorf("podsapi-server of %s ended with %v", s.node, err)
		}
	}
}

// stopPodsapiServers stops servers, all at once.
func stopPodsapiServers(t *testing.T, servers []*podsapiServer) {
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(func() { s.stop(t) })
	}
	wg.Wait()
}
