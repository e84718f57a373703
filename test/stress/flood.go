package stress

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/test/childproc"
)

// The clients of the flood run in a child process (roleFlood): the flooding
// agents are a process of their own, as hostile agents on a node are, so
// that they share the CPUs with the server and the watchers through the
// kernel's scheduler, not through the Go scheduler of the watchers' process.

// floodResult is what the flood process reports on stdout, as one JSON line,
// when it stops.
type floodResult struct {
	// Accepted calls were let through by the rate limit (GetPod's
	// NOT_FOUND included); Limited got RESOURCE_EXHAUSTED; Other got
	// anything else, the first of which is OtherErr.
	Accepted int64  `json:"accepted"`
	Limited  int64  `json:"limited"`
	Other    int64  `json:"other"`
	OtherErr string `json:"otherErr,omitempty"`
	// Elapsed is the time from before the first call to after the last
	// one returned: every accepted call took its token within it.
	Elapsed time.Duration `json:"elapsedNs"`
}

// runFlood is the flood process: on "go", clients that call ListPods and
// GetPod as fast as they can, each on its own connection, until a "stop"
// line or the end of stdin (or SIGTERM, or --limit as a safety bound). It
// prints "flooding" once the first call has returned, then the floodResult
// as JSON once every client has stopped.
func runFlood(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("stress-flood", flag.ContinueOnError)
	sock := fs.String("socket", "", "socket of the server")
	clients := fs.Int("clients", 16, "clients")
	decode := fs.Bool("decode", false, "decode the responses")
	limit := fs.Duration("limit", 10*time.Minute, "stop by itself after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *sock == "" || *clients < 1 {
		return errors.New("--socket and --clients >= 1 are required")
	}
	sctx, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stopSignals()
	fctx, stopFlood := context.WithTimeout(sctx, *limit)
	defer stopFlood()
	lines, err := commands(stdin)
	if err != nil {
		return err
	}
	go func() {
		defer stopFlood()
		for range lines {
		}
	}()
	var accepted, limited, other atomic.Int64
	var otherErr atomic.Value
	var first sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for i := range *clients {
		wg.Go(func() {
			var opts []connect.ClientOption
			if !*decode {
				opts = append(opts, connect.WithCodec(discardCodec{}))
			}
			cl, closeConns := newClient(*sock, opts...)
			defer closeConns()
			for k := 0; fctx.Err() == nil; k++ {
				var err error
				if (i+k)%2 == 0 {
					_, err = cl.ListPods(fctx, connect.NewRequest(&podsv1alpha1.PodListRequest{}))
				} else {
					_, err = cl.GetPod(fctx, connect.NewRequest(&podsv1alpha1.PodGetRequest{PodUID: "00000000-0000-0000-0000-000000000000"}))
					if connect.CodeOf(err) == connect.CodeNotFound {
						err = nil // accepted: the limit let it through
					}
				}
				switch {
				case err == nil:
					accepted.Add(1)
				case connect.CodeOf(err) == connect.CodeResourceExhausted:
					limited.Add(1)
				case fctx.Err() != nil:
				default:
					other.Add(1)
					otherErr.CompareAndSwap(nil, err.Error())
				}
				first.Do(func() { fmt.Fprintln(stdout, "flooding") })
			}
		})
	}
	wg.Wait()
	res := floodResult{Accepted: accepted.Load(), Limited: limited.Load(), Other: other.Load(), Elapsed: time.Since(start)}
	if v := otherErr.Load(); v != nil {
		res.OtherErr = v.(string)
	}
	first.Do(func() { fmt.Fprintln(stdout, "flooding") }) // nothing was called: say it anyway, the result follows
	return json.NewEncoder(stdout).Encode(res)
}

// floodProcess is the flood running as a child process.
type floodProcess struct{ proc *childproc.Process }

// startFlood starts clients flooding clients on socket in a child process
// (the stress binary again, in the flood's role) and returns once they call;
// with decode, they decode the responses. The flood is not identified to
// the server: it is the client of its UID. The process is killed when ctx
// ends, and stops by itself after limit.
func startFlood(ctx context.Context, socket string, clients int, decode bool, limit time.Duration) (*floodProcess, error) {
	proc, err := startClientProcess(ctx, roleFlood, []string{"--socket", socket, "--clients", fmt.Sprint(clients),
		"--decode=" + fmt.Sprint(decode), "--limit", limit.String()}, nil, "flooding")
	if err != nil {
		return nil, err
	}
	return &floodProcess{proc: proc}, nil
}

// stop tells the flood to stop and returns its counts.
func (f *floodProcess) stop() (floodResult, error) {
	var res floodResult
	return res, stopClientProcess(f.proc, &res)
}

// kill ends the flood process at once and waits for its exit, at most 10 s.
func (f *floodProcess) kill() { f.proc.Kill() }

// discardCodec is the flood clients' codec unless they decode: it encodes
// requests as protobuf and leaves responses undecoded (connect has read them
// whole by then), so that the flood process spends its CPU on calls rather
// than on decoding pods, which takes CPU from the whole node, not from the
// server.
type discardCodec struct{}

func (discardCodec) Name() string { return "proto" }

func (discardCodec) Marshal(m any) ([]byte, error) {
	msg, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("not a protobuf message: %T", m)
	}
	return proto.Marshal(msg)
}

// Unmarshal leaves the Pods API's responses undecoded, and decodes any other
// message: the google.rpc.Status of an error, whose details connect reads
// with this codec.
func (discardCodec) Unmarshal(b []byte, m any) error {
	switch msg := m.(type) {
	case *podsv1alpha1.PodListResponse, *podsv1alpha1.PodGetResponse:
		return nil
	case proto.Message:
		return proto.Unmarshal(b, msg)
	default:
		return fmt.Errorf("not a protobuf message: %T", m)
	}
}
