package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
)

// startFloorConn serves floor-conn with pods pods in this process and
// returns its socket and a function that stops it and reports whether every
// goroutine of the server ended.
func startFloorConn(t *testing.T, pods int) (string, func() error) {
	t.Helper()
	dir, err := os.MkdirTemp("", "fc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s.sock")
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- serve(ctx, serveConfig{Impl: ImplFloorConn, Pods: pods, Socket: sock, MaxLife: time.Hour}, func() { close(ready) })
	}()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("floor-conn: %v", err)
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		// serve returns once every connection's goroutine has ended.
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			return errors.New("floor-conn did not stop 30 s after its context was cancelled")
		}
	}
	t.Cleanup(func() { stop() })
	return sock, stop
}

// sameResponse reports whether two responses of two servers are the same
// bytes but for the revision of a list (field 2), which names the store
// instance: the same length, the same pods.
func sameResponse(a, b []byte) bool {
	ra, _ := bytesField(a, 2)
	rb, _ := bytesField(b, 2)
	return len(a) == len(b) && len(ra) == len(rb) &&
		bytes.Equal(stripField(a, 2), stripField(b, 2))
}

// stripField returns the top-level fields of the message b but field num.
func stripField(b []byte, num protowire.Number) []byte {
	var out []byte
	for len(b) > 0 {
		n, _, l := protowire.ConsumeField(b)
		if l < 0 {
			return nil
		}
		if n != num {
			out = append(out, b[:l]...)
		}
		b = b[l:]
	}
	return out
}

// call makes one unary call with the bench's grpc-go client.
func call(t *testing.T, socket, method, mask string, req []byte) ([]byte, error) {
	t.Helper()
	conn, err := grpcConn(socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var resp []byte
	err = conn.Invoke(withMask(ctx, mask), method, req, &resp)
	return resp, err
}

// TestFloorConn checks that floor-conn answers a real grpc-go client with
// the very bytes ours answers, including a list far larger than the
// client's initial flow-control window, and the errors it promises.
func TestFloorConn(t *testing.T) {
	const pods = 1000 // a list of about 5 MB: flow control must work
	dir, err := os.MkdirTemp("", "fc")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ours, err := startChild(context.Background(), childOptions{dir: dir, inProcess: true, watchQueue: 1000}, ImplOurs, pods)
	if err != nil {
		t.Fatal(err)
	}
	defer ours.stop()
	sock, stop := startFloorConn(t, pods)

	for _, tc := range []struct {
		name     string
		method   string
		mask     string
		req      []byte
		wantCode codes.Code
		minBytes int
	}{
		{name: "empty", method: methodEmpty},
		{name: "get", method: methodGet, req: getRequest(pods), minBytes: 1000},
		{name: "list larger than the window", method: methodList, minBytes: 1 << 20},
		{name: "unknown method", method: "/kubelet.pods.v1alpha1.Pods/Nope", wantCode: codes.Unimplemented},
		{name: "masked get", method: methodGet, mask: "metadata.name", req: getRequest(pods), wantCode: codes.Unimplemented},
		{name: "filtered list", method: methodList, req: []byte{0x0a, 1, 'x'}, wantCode: codes.Unimplemented},
		{name: "unknown pod", method: methodGet, req: []byte{0x0a, 1, 'x'}, wantCode: codes.NotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := call(t, sock, tc.method, tc.mask, tc.req)
			if tc.wantCode != codes.OK {
				if status.Code(err) != tc.wantCode {
					t.Fatalf("err = %v, want code %v", err, tc.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.method == methodEmpty {
				if len(got) != 0 {
					t.Fatalf("empty RPC answered %d bytes", len(got))
				}
				return
			}
			want, err := call(t, ours.socket, tc.method, "", tc.req)
			if err != nil {
				t.Fatalf("ours: %v", err)
			}
			if len(got) < tc.minBytes || !sameResponse(got, want) {
				t.Fatalf("floor-conn answered %d bytes, ours %d (equal: %v)", len(got), len(want), bytes.Equal(got, want))
			}
		})
	}

	// Calls in flight on one connection, all answered in full.
	t.Run("concurrent lists on one connection", func(t *testing.T) {
		conn, err := grpcConn(sock)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		want, err := call(t, ours.socket, methodList, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		errs := make(chan error, 4)
		for range cap(errs) {
			go func() {
				var resp []byte
				err := conn.Invoke(ctx, methodList, nil, &resp)
				if err == nil && !sameResponse(resp, want) {
					err = errors.New("a list differs from ours")
				}
				errs <- err
			}()
		}
		for range cap(errs) {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	})

	// A connection left open stops with the server.
	conn, err := grpcConn(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var resp []byte
	if err := conn.Invoke(context.Background(), methodEmpty, nil, &resp); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestFloorConnProtocolError checks that a connection that breaks the
// protocol gets a GOAWAY and is closed.
func TestFloorConnProtocolError(t *testing.T) {
	for _, tc := range []struct {
		name string
		send func(fr *http2.Framer, block []byte) error
		want http2.ErrCode
	}{
		{name: "even stream id", want: http2.ErrCodeProtocol, send: func(fr *http2.Framer, block []byte) error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 2, BlockFragment: block, EndHeaders: true})
		}},
		{name: "data on an idle stream", want: http2.ErrCodeProtocol, send: func(fr *http2.Framer, _ []byte) error {
			return fr.WriteData(7, true, []byte("x"))
		}},
		{name: "window overflow", want: http2.ErrCodeFlowControl, send: func(fr *http2.Framer, _ []byte) error {
			return fr.WriteWindowUpdate(0, 1<<31-1)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock, _ := startFloorConn(t, 1)
			nc, err := net.Dial("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			nc.SetDeadline(time.Now().Add(60 * time.Second))
			if _, err := io.WriteString(nc, http2.ClientPreface); err != nil {
				t.Fatal(err)
			}
			fr := http2.NewFramer(nc, nc)
			var block bytes.Buffer
			enc := hpack.NewEncoder(&block)
			for _, hf := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: methodEmpty}, {Name: ":authority", Value: "x"}} {
				enc.WriteField(hf)
			}
			if err := fr.WriteSettings(); err != nil {
				t.Fatal(err)
			}
			if err := tc.send(fr, block.Bytes()); err != nil {
				t.Fatal(err)
			}
			var got *http2.GoAwayFrame
			for {
				f, err := fr.ReadFrame()
				if err != nil {
					if !errors.Is(err, io.EOF) {
						t.Fatalf("read: %v, want the server to close the connection", err)
					}
					break
				}
				if g, ok := f.(*http2.GoAwayFrame); ok {
					got = g
				}
			}
			if got == nil || got.ErrCode != tc.want {
				t.Fatalf("GOAWAY %+v, want code %v", got, tc.want)
			}
		})
	}
}
