package kubetest_test

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/podsapi/podsapi/test/kubetest"
)

// TestProxy sends bytes through a proxy to an echo server and reads them
// back: the proxy counts them each way; cut, it refuses connections and
// closes the open one; restored, it forwards again on the same address.
func TestProxy(t *testing.T) {
	echo := echoServer(t)
	p := kubetest.NewProxy(t, echo)

	c := dial(t, p.Addr())
	roundTrip(t, c, 1000)
	if up, down := p.Bytes(); up != 1000 || down != 1000 {
		t.Fatalf("Bytes() = %d up, %d down; want 1000 each", up, down)
	}

	p.Cut()
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection read after the cut, want it closed")
	}
	if c, err := net.Dial("tcp", p.Addr()); err == nil {
		_ = c.Close()
		t.Fatal("dial of a cut proxy succeeded, want refused")
	}

	p.Restore(t)
	roundTrip(t, dial(t, p.Addr()), 10)
	if up, down := p.Bytes(); up != 1010 || down != 1010 {
		t.Fatalf("Bytes() = %d up, %d down after the restore; want 1010 each", up, down)
	}
}

// echoServer serves, on a loopback port, connections that write back what
// they read; it stops at the end of the test.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
				_ = c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// roundTrip writes n bytes to c and reads them back.
func roundTrip(t *testing.T, c net.Conn, n int) {
	t.Helper()
	sent := bytes.Repeat([]byte("p"), n)
	if _, err := c.Write(sent); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read back: %v", err)
	}
	if !bytes.Equal(got, sent) {
		t.Fatal("read back other bytes than sent")
	}
}
