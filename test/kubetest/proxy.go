package kubetest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards TCP connections on a loopback port to a target address,
// counts the bytes each way, and can be cut: the way a test takes the API
// server away from one client while it stays up for the others, or
// measures what a client's requests cost on the wire (TLS included),
// whatever the client's code. A cut proxy closes its connections and its
// listener, so that new connections are refused, as they are by a stopped
// API server.
type Proxy struct {
	addr     string
	target   string
	wg       sync.WaitGroup
	up, down atomic.Int64

	mu    sync.Mutex
	ln    net.Listener // Nil while cut.
	conns map[net.Conn]struct{}
}

// NewProxy starts a proxy to target on a free loopback port, and stops it
// at the end of the test.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{addr: ln.Addr().String(), target: target, conns: make(map[net.Conn]struct{})}
	p.serve(ln)
	t.Cleanup(func() {
		p.Cut()
		p.wg.Wait()
	})
	return p
}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

// Bytes returns the bytes forwarded so far to the target (up) and back
// (down). A byte counts as it is forwarded: a kept-alive connection's
// requests count before it closes.
func (p *Proxy) Bytes() (up, down int64) { return p.up.Load(), p.down.Load() }

// Cut closes the listener and every forwarded connection until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
}

// Restore listens again on the same address.
func (p *Proxy) Restore(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("proxy: listen again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go p.forward(c)
		}
	}()
}

// track adds c to the open connections, or closes it when the proxy is
// cut; it says whether c is open.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
	_ = c.Close()
}

func (p *Proxy) forward(c net.Conn) {
	defer p.wg.Done()
	if !p.track(c) {
		return
	}
	defer p.untrack(c)
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(up) {
		return
	}
	defer p.untrack(up)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(counting{up, &p.up}, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(counting{c, &p.down}, up); done <- struct{}{} }()
	<-done // Either side ended: close both, which ends the other copy.
	p.untrack(c)
	p.untrack(up)
	<-done
}

// counting is a writer that counts the bytes written through it. It counts
// them before it writes them (and takes back what was not written), so that
// a peer that has read a byte finds it counted.
type counting struct {
	io.Writer
	n *atomic.Int64
}

func (c counting) Write(b []byte) (int, error) {
	c.n.Add(int64(len(b)))
	n, err := c.Writer.Write(b)
	c.n.Add(int64(n - len(b)))
	return n, err
}
