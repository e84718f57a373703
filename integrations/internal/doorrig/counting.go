package doorrig

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// CountingProxy forwards TCP connections on a loopback port to a target
// and counts the bytes each way: what a client's requests cost on the wire
// (TLS included), whatever the client's code.
type CountingProxy struct {
	// Addr is the proxy's host:port.
	Addr string

	up, down, conns atomic.Int64
	ln              net.Listener
	wg              sync.WaitGroup
	mu              sync.Mutex
	closed          bool
	open            map[net.Conn]struct{}
}

// NewCountingProxy starts a proxy to target on a free loopback port and
// stops it, and its connections, at the end of the test.
func NewCountingProxy(t testing.TB, target string) *CountingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &CountingProxy{Addr: ln.Addr().String(), ln: ln, open: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.serve(target)
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		p.closed = true
		for c := range p.open {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// Bytes returns the bytes sent to the target (up) and back (down) so far.
func (p *CountingProxy) Bytes() (up, down int64) { return p.up.Load(), p.down.Load() }

// Conns returns the number of connections accepted so far.
func (p *CountingProxy) Conns() int64 { return p.conns.Load() }

func (p *CountingProxy) serve(target string) {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.conns.Add(1)
		s, err := net.Dial("tcp", target)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, s) {
			return
		}
		p.wg.Add(2)
		go p.copy(s, c, &p.up)
		go p.copy(c, s, &p.down)
	}
}

// track registers c and s unless the proxy is stopping.
func (p *CountingProxy) track(c, s net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		_ = s.Close()
		return false
	}
	p.open[c], p.open[s] = struct{}{}, struct{}{}
	return true
}

func (p *CountingProxy) copy(dst, src net.Conn, n *atomic.Int64) {
	defer p.wg.Done()
	_, _ = io.Copy(counter{dst, n}, src)
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.open, dst)
	delete(p.open, src)
	p.mu.Unlock()
}

// counter counts the bytes written through it as they are written: a
// kept-alive connection's requests count before it closes.
type counter struct {
	io.Writer
	n *atomic.Int64
}

func (c counter) Write(b []byte) (int, error) {
	w, err := c.Writer.Write(b)
	c.n.Add(int64(w))
	return w, err
}
