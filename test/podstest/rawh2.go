package podstest

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
)

// H2Frame is a frame read by a raw HTTP/2 client (ReadFrames).
type H2Frame struct {
	Type, Flags byte
	Stream      uint32
	Payload     []byte
}

// RawH2 dials socket, sends the client preface and an empty SETTINGS
// frame, and returns the connection, closed at the end of the test. It
// answers nothing afterwards.
func RawH2(t *testing.T, socket string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(Deadline(t))
	// A connection the server refused fails this write: ReadFrames then
	// sees it closed.
	_, _ = io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
	return c
}

// ReadFrames reads frames until the server closes c, and returns them.
func ReadFrames(t *testing.T, c net.Conn) []H2Frame {
	t.Helper()
	var frames []H2Frame
	for {
		var hdr [9]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "reset by peer") {
				return frames
			}
			t.Fatalf("reading frames: %v (the server did not close the connection)", err)
		}
		n := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
		f := H2Frame{Type: hdr[3], Flags: hdr[4], Stream: binary.BigEndian.Uint32(hdr[5:]) &^ (1 << 31), Payload: make([]byte, n)}
		if _, err := io.ReadFull(c, f.Payload); err != nil {
			return frames
		}
		frames = append(frames, f)
	}
}
