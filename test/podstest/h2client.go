package podstest

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// H2Client is a raw HTTP/2 client over a UNIX socket, for the attacks real
// clients do not make.
type H2Client struct {
	t    *testing.T
	Conn net.Conn
	Fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
	next uint32
	mu   sync.Mutex // held while a frame is written
}

// Write writes frames with fr, alone.
func (c *H2Client) Write(f func(fr *http2.Framer) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return f(c.Fr)
}

// DialH2 connects to socket and sends the preface and SETTINGS.
func DialH2(t *testing.T, socket string, settings ...http2.Setting) *H2Client {
	t.Helper()
	conn, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(Deadline(t))
	c := &H2Client{t: t, Conn: conn, next: 1}
	bw := bufio.NewWriter(conn)
	c.Fr = http2.NewFramer(writerFunc(func(p []byte) (int, error) {
		n, err := bw.Write(p)
		if err == nil {
			err = bw.Flush()
		}
		return n, err
	}), conn)
	c.Fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.Fr.MaxHeaderListSize = 1 << 20
	c.enc = hpack.NewEncoder(&c.hbuf)
	if _, err := io.WriteString(bw, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	for _, st := range settings {
		if st.ID == http2.SettingMaxFrameSize {
			c.Fr.SetMaxReadFrameSize(st.Val)
		}
	}
	if err := c.Write(func(fr *http2.Framer) error { return fr.WriteSettings(settings...) }); err != nil {
		t.Fatal(err)
	}
	// The server's SETTINGS come first: acknowledged here, so that no
	// acknowledgement falls in the middle of a header block later.
	for {
		f, err := c.Fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the server's SETTINGS: %v", err)
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			if err := c.Write(func(fr *http2.Framer) error { return fr.WriteSettingsAck() }); err != nil {
				t.Fatal(err)
			}
			return c
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// Headers returns the HPACK block of a gRPC call to path.
func (c *H2Client) Headers(path string) []byte {
	c.hbuf.Reset()
	for _, kv := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":authority", "podsapi"}, {":path", path},
		{"content-type", "application/grpc"}, {"te", "trailers"},
	} {
		c.enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	return bytes.Clone(c.hbuf.Bytes())
}

// Open starts a call to path with HEADERS only: its body never comes.
func (c *H2Client) Open(path string) uint32 {
	c.t.Helper()
	id := c.next
	c.next += 2
	if err := c.OpenErr(path, id); err != nil {
		c.t.Fatal(err)
	}
	return id
}

// OpenErr sends the HEADERS of a call to path on stream id.
func (c *H2Client) OpenErr(path string, id uint32) error {
	return c.Write(func(fr *http2.Framer) error {
		return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.Headers(path), EndHeaders: true})
	})
}

// StreamEnd is how a stream ended: its gRPC status, or a reset.
type StreamEnd struct {
	Status string
	Reset  bool
}

// ReadUntil reads frames, answering pings and settings, until done holds
// or the connection ends; it returns the ends of the streams and whether a
// GOAWAY came.
func (c *H2Client) ReadUntil(done func(ends map[uint32]StreamEnd, goaway, closed bool) bool) (map[uint32]StreamEnd, bool) {
	c.t.Helper()
	ends := map[uint32]StreamEnd{}
	status := map[uint32]string{}
	goaway := false
	for !done(ends, goaway, false) {
		f, err := c.Fr.ReadFrame()
		if err != nil {
			if errors.Is(err, io.EOF) || strings.Contains(err.Error(), "reset by peer") {
				if !done(ends, goaway, true) {
					c.t.Fatalf("connection closed; %d streams ended, goaway %v", len(ends), goaway)
				}
				return ends, goaway
			}
			c.t.Fatalf("reading frames: %v (%d streams ended so far)", err, len(ends))
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if s := f.PseudoValue("status"); s == "" || f.StreamEnded() {
				for _, hf := range f.Fields {
					if hf.Name == "grpc-status" {
						status[f.StreamID] = hf.Value
					}
				}
			}
			if f.StreamEnded() {
				ends[f.StreamID] = StreamEnd{Status: status[f.StreamID]}
			}
		case *http2.RSTStreamFrame:
			if _, ok := ends[f.StreamID]; !ok {
				ends[f.StreamID] = StreamEnd{Status: status[f.StreamID], Reset: true}
			}
		case *http2.GoAwayFrame:
			goaway = true
		case *http2.PingFrame:
			if !f.IsAck() {
				c.Write(func(fr *http2.Framer) error { return fr.WritePing(true, f.Data) })
			}
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.Write(func(fr *http2.Framer) error { return fr.WriteSettingsAck() })
			}
		}
	}
	return ends, goaway
}
