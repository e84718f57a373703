package stress

import (
	"context"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/net/http2"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
)

// garbageKind is one kind of hostile connection.
type garbageKind struct {
	name string
	send func(socket string, k int)
}

// garbageKinds are the hostile connections of the garbage scenario.
var garbageKinds = []garbageKind{
	{"random bytes", func(socket string, k int) {
		raw(socket, randomBytes(k), drain)
	}},
	{"random frames after the preface", func(socket string, k int) {
		raw(socket, append(frames((*h2Conn).preface), randomBytes(k)...), drain)
	}},
	{"truncated frame", func(socket string, k int) {
		// A HEADERS frame announcing 16000 bytes, cut after 10.
		block := make([]byte, maxFrameBytes)
		copy(block, randomBytes(k)[:10])
		b := frames(func(c *h2Conn) error {
			if err := c.preface(); err != nil {
				return err
			}
			return c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndHeaders: true})
		})
		raw(socket, b[:len(b)-len(block)+10], nil)
	}},
	{"invalid gRPC length prefix", func(socket string, k int) {
		// A gRPC envelope announcing ~4 GiB, or with unknown flags.
		msg := []byte{0, 0xff, 0xff, 0xff, 0xf0, 1, 2, 3}
		if k%2 == 0 {
			msg = []byte{0x80, 0, 0, 0, 1, 0}
		}
		raw(socket, frames(func(c *h2Conn) error {
			if err := c.preface(); err != nil {
				return err
			}
			if err := c.request(1, "/kubelet.pods.v1alpha1.Pods/GetPod", 0); err != nil {
				return err
			}
			return c.fr.WriteData(1, true, msg)
		}), untilStreamEnd)
	}},
	{"oversized HTTP/2 headers", func(socket string, k int) {
		raw(socket, frames(func(c *h2Conn) error {
			if err := c.preface(); err != nil {
				return err
			}
			return c.request(1, "/kubelet.pods.v1alpha1.Pods/ListPods", 100<<10)
		}), untilStreamEnd)
	}},
	{"oversized message", func(socket string, k int) {
		cl, closeConns := newClient(socket)
		defer closeConns()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = cl.GetPod(ctx, connect.NewRequest(&podsv1alpha1.PodGetRequest{PodUID: strings.Repeat("u", 1<<20)}))
	}},
	{"HTTP/1.1 requests", func(socket string, k int) {
		reqs := []string{
			"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
			"POST /kubelet.pods.v1alpha1.Pods/ListPods HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\n{{{{{",
			"POST /kubelet.pods.v1alpha1.Pods/GetPod HTTP/1.1\r\nHost: x\r\nContent-Type: application/grpc\r\nContent-Length: 3\r\n\r\nabc",
			"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", 100<<10) + "\r\n\r\n",
			"GET / HTTP/9.9\r\n\r\n",
		}
		raw(socket, []byte(reqs[k%len(reqs)]), drain)
	}},
	{"silent and half-open", func(socket string, k int) {
		if k%2 == 0 {
			raw(socket, nil, nil)
		} else {
			raw(socket, []byte(http2.ClientPreface[:10]), nil)
		}
	}},
}

func randomBytes(k int) []byte {
	r := rand.New(rand.NewPCG(uint64(k), 1))
	b := make([]byte, 16+r.IntN(4096))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// How raw reads the answer.
type readMode func(net.Conn)

// drain reads until the server closes the connection (or 2 s pass).
func drain(c net.Conn) { _, _ = io.Copy(io.Discard, c) }

// untilStreamEnd reads HTTP/2 frames until stream 1 ends or is reset, or
// the connection goes away.
func untilStreamEnd(c net.Conn) {
	fr := http2.NewFramer(io.Discard, c)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch {
		case f.Header().Type == http2.FrameGoAway:
			return
		case f.Header().StreamID == 1 && endsStream(f):
			return
		}
	}
}

// raw dials, writes b (errors ignored: the server may close first), reads
// as mode says, and closes.
func raw(socket string, b []byte, mode readMode) {
	c, err := net.Dial("unix", socket)
	if err != nil {
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if len(b) > 0 {
		_, _ = c.Write(b)
	}
	if mode != nil {
		mode(c)
	}
}
