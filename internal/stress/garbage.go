package stress

import (
	"context"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"time"

	"connectrpc.com/connect"

	podsv1alpha1 "github.com/podsapi/podsapi/gen/kubelet/pods/v1alpha1"
)

// garbageKind is one kind of hostile connection.
type garbageKind struct {
	name string
	send func(socket string, k int)
}

const preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// garbageKinds are the hostile connections of the garbage scenario.
var garbageKinds = []garbageKind{
	{"random bytes", func(socket string, k int) {
		raw(socket, randomBytes(k), drain)
	}},
	{"random frames after the preface", func(socket string, k int) {
		raw(socket, append([]byte(preface+settingsFrame), randomBytes(k)...), drain)
	}},
	{"truncated frame", func(socket string, k int) {
		b := []byte(preface + settingsFrame)
		b = append(b, frameHeader(16000, 0x1, 0x4, 1)...)
		raw(socket, append(b, randomBytes(k)[:10]...), nil)
	}},
	{"invalid gRPC length prefix", func(socket string, k int) {
		b := []byte(preface + settingsFrame)
		b = append(b, headersFrames(1, "/kubelet.pods.v1alpha1.Pods/GetPod", 0)...)
		msg := []byte{0, 0xff, 0xff, 0xff, 0xf0, 1, 2, 3}
		if k%2 == 0 {
			msg = []byte{0x80, 0, 0, 0, 1, 0} // unknown flags
		}
		b = append(b, frame(0x0, 0x1, 1, msg)...)
		raw(socket, b, untilStreamEnd)
	}},
	{"oversized HTTP/2 headers", func(socket string, k int) {
		b := []byte(preface + settingsFrame)
		b = append(b, headersFrames(1, "/kubelet.pods.v1alpha1.Pods/ListPods", 100<<10)...)
		raw(socket, b, untilStreamEnd)
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
			raw(socket, []byte(preface[:10]), nil)
		}
	}},
}

const settingsFrame = "\x00\x00\x00\x04\x00\x00\x00\x00\x00"

func randomBytes(k int) []byte {
	r := rand.New(rand.NewPCG(uint64(k), 1))
	b := make([]byte, 16+r.IntN(4096))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func frameHeader(n int, typ, flags byte, stream uint32) []byte {
	h := []byte{byte(n >> 16), byte(n >> 8), byte(n), typ, flags, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(h[5:], stream)
	return h
}

func frame(typ, flags byte, stream uint32, payload []byte) []byte {
	return append(frameHeader(len(payload), typ, flags, stream), payload...)
}

// hpackString encodes s as an HPACK string literal without Huffman coding.
func hpackString(b []byte, s string) []byte {
	n := len(s)
	if n < 127 {
		b = append(b, byte(n))
	} else {
		b = append(b, 127)
		n -= 127
		for n >= 128 {
			b = append(b, byte(n%128+128))
			n /= 128
		}
		b = append(b, byte(n))
	}
	return append(b, s...)
}

// headersFrames returns a gRPC request's HEADERS (and CONTINUATION) frames,
// with a header of extra bytes when extra > 0.
func headersFrames(stream uint32, path string, extra int) []byte {
	var block []byte
	for _, kv := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":path", path}, {":authority", "localhost"},
		{"content-type", "application/grpc"}, {"te", "trailers"},
	} {
		block = append(block, 0)
		block = hpackString(hpackString(block, kv[0]), kv[1])
	}
	if extra > 0 {
		block = append(block, 0)
		block = hpackString(hpackString(block, "x-big"), strings.Repeat("b", extra))
	}
	var out []byte
	for first := true; first || len(block) > 0; first = false {
		chunk := block[:min(len(block), 16000)]
		block = block[len(chunk):]
		var flags byte
		if len(block) == 0 {
			flags = 0x4 // END_HEADERS
		}
		typ := byte(0x9) // CONTINUATION
		if first {
			typ = 0x1
		}
		out = append(out, frame(typ, flags, stream, chunk)...)
	}
	return out
}

// How raw reads the answer.
type readMode func(net.Conn)

// drain reads until the server closes the connection (or 2 s pass).
func drain(c net.Conn) { _, _ = io.Copy(io.Discard, c) }

// untilStreamEnd reads HTTP/2 frames until stream 1 ends or is reset, or
// the connection goes away.
func untilStreamEnd(c net.Conn) {
	for {
		var h [9]byte
		if _, err := io.ReadFull(c, h[:]); err != nil {
			return
		}
		n := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		if _, err := io.CopyN(io.Discard, c, int64(n)); err != nil {
			return
		}
		stream := binary.BigEndian.Uint32(h[5:]) &^ (1 << 31)
		switch {
		case h[3] == 0x7: // GOAWAY
			return
		case stream == 1 && (h[3] == 0x3 || h[4]&0x1 != 0): // RST_STREAM, END_STREAM
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
