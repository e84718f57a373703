package bench

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podsapi/podsapi/kubeapi"
	"github.com/podsapi/podsapi/kubeapi/door"
	"github.com/podsapi/podsapi/source/apiserver"
	"github.com/podsapi/podsapi/store"
	"github.com/podsapi/podsapi/test/childproc"
)

// The front door of the control-plane measurement: podsapi's Kubernetes API
// (kubeapi.Handler) for one node, fed by the API-server source (one
// reflector on the API server), served over loopback TLS with HTTP/2
// (httptest) behind the door of kubeapi/door, which authenticates each
// informer's token with a TokenReview and authorizes its requests with a
// SubjectAccessReview, both cached, as podsapi-server's --kube-api-address
// does; in a child process of its own so that its CPU and memory are read
// from /proc apart from the informers that read it. The informers only
// list and watch the node's pods: nothing is passed through.

// roleFrontDoor is the child role that serves one node's front door.
const roleFrontDoor = "kubeapi-frontdoor"

// frontDoorMain serves the front door of one node, when this process is a
// child in roleFrontDoor: it says "ready URL CA" once its store has synced
// (CA: the base64 of the serving certificate's PEM), and stops when its
// stdin is closed.
func frontDoorMain(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet(roleFrontDoor, flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "the kubeconfig of the API server")
	node := fs.String("node", "", "the node whose pods are served")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *kubeconfig == "" || *node == "" {
		return errors.New("-kubeconfig and -node are required")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := store.New()
	src := apiserver.New(*node, apiserver.WithKubeconfig(*kubeconfig))
	ran := make(chan error, 1)
	go func() { ran <- src.Run(ctx, st) }()
	select {
	case <-st.SyncedC():
	case err := <-ran:
		return fmt.Errorf("the API-server source ended before it synced: %v", err)
	case <-time.After(loadTimeout):
		return fmt.Errorf("the API-server source did not sync within %v", loadTimeout)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	auth, err := door.NewAuth(cfg)
	if err != nil {
		return err
	}
	srv := httptest.NewUnstartedServer(door.New(kubeapi.New(st, *node), door.WithAuth(auth)))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if _, err := fmt.Fprintf(stdout, "ready %s %s\n", srv.URL, base64.StdEncoding.EncodeToString(ca)); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, stdin) // Until the parent closes it.
	// No new connection, then none left: Close waits for the handlers, and
	// a watch's handler returns once its connection is gone.
	_ = srv.Listener.Close()
	srv.CloseClientConnections()
	srv.Close()
	cancel()
	return <-ran
}

// frontDoor is a running front-door child.
type frontDoor struct {
	proc *childproc.Process
	cfg  *rest.Config // Reaches the front door, for an informer.
}

// startFrontDoors starts one front-door child per node, all at once, and
// returns once each has synced. The informers of each reach it with token,
// which its door authenticates. They are stopped at the end of the test.
func startFrontDoors(t *testing.T, kubeconfig, token string, nodes []string) []*frontDoor {
	t.Helper()
	doors := make([]*frontDoor, len(nodes))
	for i, node := range nodes {
		p, err := childproc.Start(childproc.Spec{Role: roleFrontDoor, Args: []string{"-kubeconfig", kubeconfig, "-node", node}})
		if err != nil {
			t.Fatal(err)
		}
		doors[i] = &frontDoor{proc: p}
		t.Cleanup(func() { stopFrontDoor(t, p) })
	}
	ctx, cancel := context.WithTimeout(t.Context(), loadTimeout)
	defer cancel()
	for i, d := range doors {
		line, err := d.proc.Expect(ctx, "ready ")
		if err != nil {
			t.Fatalf("front door of %s: %v", nodes[i], err)
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("front door of %s said %q", nodes[i], line)
		}
		ca, err := base64.StdEncoding.DecodeString(f[2])
		if err != nil {
			t.Fatalf("front door of %s: its CA: %v", nodes[i], err)
		}
		d.cfg = &rest.Config{Host: f[1], BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: ca}, QPS: 100, Burst: 200}
	}
	return doors
}

// stopFrontDoor stops a front-door child, by closing its stdin, and kills
// it if it does not exit within 10 s.
func stopFrontDoor(t *testing.T, p *childproc.Process) {
	select {
	case <-p.Exited():
		return
	default:
	}
	_ = p.CloseStdin()
	if err := p.Wait(10 * time.Second); err != nil {
		t.Errorf("front door: %v", err)
	}
}

// stopFrontDoors stops doors, all at once.
func stopFrontDoors(t *testing.T, doors []*frontDoor) {
	var wg sync.WaitGroup
	for _, d := range doors {
		wg.Go(func() { stopFrontDoor(t, d.proc) })
	}
	wg.Wait()
}

// doorsCPU returns the CPU seconds that doors have used, together.
func doorsCPU(t *testing.T, doors []*frontDoor) float64 {
	t.Helper()
	var sum time.Duration
	for _, d := range doors {
		c, err := childproc.CPU(d.proc.Pid())
		if err != nil {
			t.Fatal(err)
		}
		sum += c
	}
	return sum.Seconds()
}

// doorsRSS returns the resident memory of doors, together.
func doorsRSS(t *testing.T, doors []*frontDoor) float64 {
	t.Helper()
	var sum int64
	for _, d := range doors {
		r, err := childproc.RSS(d.proc.Pid())
		if err != nil {
			t.Fatal(err)
		}
		sum += r
	}
	return float64(sum)
}

// frontDoorChild runs the front door when this process is a child in
// roleFrontDoor, and reports whether it was one and its exit code.
func frontDoorChild() (bool, int) {
	if childproc.Role() != roleFrontDoor {
		return false, 0
	}
	if err := frontDoorMain(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "front door:", err)
		return true, 1
	}
	return true, 0
}
