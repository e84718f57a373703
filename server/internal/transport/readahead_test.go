package transport

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// socketPair returns both ends of a connection over a UNIX socket.
func socketPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	dir, err := os.MkdirTemp("", "ra")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	client, err = net.Dial("unix", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// countingConn counts the reads of the socket.
type countingConn struct {
	net.Conn
	reads int
}

func (c *countingConn) Read(p []byte) (int, error) {
	c.reads++
	return c.Conn.Read(p)
}

// TestReadAhead reads what a client wrote, in reads of the sizes net/http's
// HTTP/2 server makes (a frame's 9-byte header, then its payload) and
// larger ones: every byte arrives once and in order, through the buffer or
// around it, the end of the connection is reported after the last byte,
// not before, and small reads of bytes that are there take them from the
// socket readAhead at a time.
func TestReadAhead(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reads []int // the sizes of the reads, repeated
	}{
		{name: "frame headers and window updates", reads: []int{9, 4}},
		{name: "one byte at a time", reads: []int{1}},
		{name: "larger than the buffer", reads: []int{readAhead, 3 * readAhead}},
		{name: "mixed", reads: []int{9, 2 * readAhead, 4, 100, readAhead - 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, server := socketPair(t)
			// Fewer bytes than the socket buffers, all written before
			// the first read.
			want := make([]byte, 16<<10)
			for i := range want {
				want[i] = byte(i * 7)
			}
			if _, err := client.Write(want); err != nil {
				t.Fatal(err)
			}
			client.Close()
			socket := &countingConn{Conn: server}
			pc := &peerConn{Conn: socket}
			var got []byte
			var err error
			for i := 0; err == nil; i++ {
				p := make([]byte, tc.reads[i%len(tc.reads)])
				var n int
				n, err = pc.Read(p)
				got = append(got, p[:n]...)
			}
			if !errors.Is(err, io.EOF) {
				t.Fatalf("the read after the last byte: %v, want EOF", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("read %d bytes, want the %d written, in order", len(got), len(want))
			}
			if most := 2*len(want)/readAhead + 2; socket.reads > most {
				t.Fatalf("%d reads of the socket for %d bytes, want at most %d", socket.reads, len(want), most)
			}
		})
	}
}
