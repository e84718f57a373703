package stress

import (
	"bytes"
	"io"
	"strings"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// maxFrameBytes is the largest frame payload the hostile clients write: the
// default SETTINGS_MAX_FRAME_SIZE, which they never raise.
const maxFrameBytes = 16000

// h2Conn writes the HTTP/2 frames of a hand-driven client connection with
// x/net/http2's Framer (and hpack for header blocks), and reads the
// server's. It is not safe for concurrent use.
type h2Conn struct {
	w     io.Writer
	fr    *http2.Framer
	enc   *hpack.Encoder
	block bytes.Buffer // the header block being encoded
}

// newH2Conn returns an h2Conn writing to w and reading from r (nil when
// the connection is only written).
func newH2Conn(w io.Writer, r io.Reader) *h2Conn {
	c := &h2Conn{w: w, fr: http2.NewFramer(w, r)}
	c.enc = hpack.NewEncoder(&c.block)
	return c
}

// preface writes the client connection preface and an empty SETTINGS
// frame.
func (c *h2Conn) preface() error {
	if _, err := io.WriteString(c.w, http2.ClientPreface); err != nil {
		return err
	}
	return c.fr.WriteSettings()
}

// request writes the HEADERS (and CONTINUATION) frames of a gRPC request of
// path on stream, with a header of extra bytes when extra > 0. The stream
// stays open for DATA.
func (c *h2Conn) request(stream uint32, path string, extra int) error {
	c.block.Reset()
	for _, kv := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":path", path}, {":authority", "localhost"},
		{"content-type", "application/grpc"}, {"te", "trailers"},
	} {
		if err := c.enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]}); err != nil {
			return err
		}
	}
	if extra > 0 {
		if err := c.enc.WriteField(hpack.HeaderField{Name: "x-big", Value: strings.Repeat("b", extra)}); err != nil {
			return err
		}
	}
	block := c.block.Bytes()
	chunk := block[:min(len(block), maxFrameBytes)]
	block = block[len(chunk):]
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: chunk, EndHeaders: len(block) == 0}); err != nil {
		return err
	}
	for len(block) > 0 {
		chunk = block[:min(len(block), maxFrameBytes)]
		block = block[len(chunk):]
		if err := c.fr.WriteContinuation(stream, len(block) == 0, chunk); err != nil {
			return err
		}
	}
	return nil
}

// frames returns the bytes that write writes with an h2Conn.
func frames(write func(c *h2Conn) error) []byte {
	var b bytes.Buffer
	if err := write(newH2Conn(&b, nil)); err != nil {
		panic("stress: writing frames to a buffer: " + err.Error()) // a bytes.Buffer does not fail
	}
	return b.Bytes()
}

// endsStream reports whether f ends or resets its stream.
func endsStream(f http2.Frame) bool {
	h := f.Header()
	switch h.Type {
	case http2.FrameRSTStream:
		return true
	case http2.FrameHeaders, http2.FrameData:
		return h.Flags.Has(http2.FlagDataEndStream) // END_STREAM is the same bit in both
	}
	return false
}
