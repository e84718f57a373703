package kubeletgrpc_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	"github.com/podsapi/podsapi/source/kubeletgrpc"
	"github.com/podsapi/podsapi/test/sourcetest"
)

// pipeListener is a net.Listener of in-memory connections (net.Pipe), so
// that a grpc-go server and a Source can run inside a synctest bubble.
type pipeListener struct {
	frames   frameCounter
	conns    chan net.Conn
	done     chan struct{}
	once     sync.Once
	accepted atomic.Int32
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) dial(ctx context.Context) (net.Conn, error) {
	client, server := memPipe()
	l.frames.skip = 24 // the client preface
	server.frames = &l.frames
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		l.accepted.Add(1)
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// memConn is one end of an in-memory connection whose writes are
// buffered (net.Pipe's are not: two ends writing their HTTP/2 settings at
// once would block each other). Deadlines are ignored: neither grpc-go
// nor net/http needs one to fire here.
type memConn struct {
	frames    *frameCounter // of what this end reads, when set
	in, out   chan []byte
	pending   []byte
	closed    chan struct{}
	peer      *memConn
	closeOnce sync.Once
}

func memPipe() (*memConn, *memConn) {
	a2b, b2a := make(chan []byte, 1024), make(chan []byte, 1024)
	a := &memConn{in: b2a, out: a2b, closed: make(chan struct{})}
	b := &memConn{in: a2b, out: b2a, closed: make(chan struct{})}
	a.peer, b.peer = b, a
	return a, b
}

func (c *memConn) Read(p []byte) (int, error) {
	if len(c.pending) == 0 {
		select {
		case b := <-c.in:
			c.pending = b
		case <-c.closed:
			return 0, net.ErrClosed
		case <-c.peer.closed:
			select {
			case b := <-c.in:
				c.pending = b
			default:
				return 0, io.EOF
			}
		}
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	if c.frames != nil {
		c.frames.feed(p[:n])
	}
	return n, nil
}

// frameCounter counts the HTTP/2 PING frames (not their ACKs) of a
// client's byte stream, after its 24-byte preface.
type frameCounter struct {
	skip  int    // bytes of the preface or of a frame's payload left
	head  []byte // the frame header read so far
	pings atomic.Int32
}

func (f *frameCounter) feed(b []byte) {
	for len(b) > 0 {
		if f.skip > 0 {
			n := min(f.skip, len(b))
			f.skip -= n
			b = b[n:]
			continue
		}
		n := min(9-len(f.head), len(b))
		f.head = append(f.head, b[:n]...)
		b = b[n:]
		if len(f.head) == 9 {
			length := int(f.head[0])<<16 | int(f.head[1])<<8 | int(f.head[2])
			if f.head[3] == 0x6 && f.head[4]&0x1 == 0 { // PING, not ACK
				f.pings.Add(1)
			}
			f.skip, f.head = length, f.head[:0]
		}
	}
}

func (c *memConn) Write(p []byte) (int, error) {
	b := append([]byte(nil), p...)
	select {
	case c.out <- b:
		return len(p), nil
	case <-c.closed:
		return 0, net.ErrClosed
	case <-c.peer.closed:
		return 0, io.ErrClosedPipe
	}
}

func (c *memConn) Close() error                     { c.closeOnce.Do(func() { close(c.closed) }); return nil }
func (c *memConn) LocalAddr() net.Addr              { return pipeAddr{} }
func (c *memConn) RemoteAddr() net.Addr             { return pipeAddr{} }
func (c *memConn) SetDeadline(time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// quietKubelet is a grpc-go server with grpc-go's default keepalive
// enforcement policy (none given: MinTime 5 minutes, as a kubelet's Pods
// API server), whose WatchPods sends the sync marker and then nothing:
// the quiet spell in which a Source pings.
func quietKubelet(l *pipeListener, watches *atomic.Int32) *grpc.Server {
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(stream)
		if method != "/v1alpha1.Pods/WatchPods" {
			return errors.New("unexpected method " + method)
		}
		if err := stream.RecvMsg(new(v1alpha1.WatchPodsRequest)); err != nil {
			return err
		}
		watches.Add(1)
		if err := stream.SendMsg(&v1alpha1.WatchPodsEvent{Type: v1alpha1.EventType_INITIAL_SYNC_COMPLETE}); err != nil {
			return err
		}
		<-stream.Context().Done()
		return nil
	}))
	go srv.Serve(l)
	return srv
}

// TestKeepaliveWithinGRPCDefaultPolicy runs a Source against a grpc-go
// server with the default enforcement policy for an hour of a quiet
// connection, in a synctest bubble (fake time): with the default ping
// interval it keeps its one connection and its one watch; with the 30 s
// interval of earlier versions the server sends GOAWAY too_many_pings and
// the Source has to reconnect, as a real kubelet made it do.
func TestKeepaliveWithinGRPCDefaultPolicy(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     []kubeletgrpc.Option
		wantKept bool
		minPings int32 // pings the server received in the hour, at least
	}{
		// Every 6 minutes of silence: 9 or 10 pings in the hour.
		{"default interval", nil, true, 9},
		{"shorter interval raised to the minimum", []kubeletgrpc.Option{kubeletgrpc.WithPingInterval(30 * time.Second)}, true, 11},
		{"30s interval unchecked", []kubeletgrpc.Option{kubeletgrpc.WithUncheckedPingInterval(30 * time.Second)}, false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := newPipeListener()
				var watches atomic.Int32
				srv := quietKubelet(l, &watches)
				rec := sourcetest.NewRecorder()
				src := kubeletgrpc.New(append([]kubeletgrpc.Option{
					kubeletgrpc.WithDialer(l.dial),
					kubeletgrpc.WithLogger(sourcetest.NewLogs(t).Logger()),
					kubeletgrpc.WithBackoff(time.Second, time.Second),
					// No resync: its lists would end the quiet spells.
					kubeletgrpc.WithResyncInterval(-1),
				}, tc.opts...)...)
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() { done <- src.Run(ctx, rec) }()
				time.Sleep(time.Hour) // fake time: an hour of a quiet connection
				synctest.Wait()
				conns, ws, pings := l.accepted.Load(), watches.Load(), l.frames.pings.Load()
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
				srv.Stop()
				l.Close()
				kept := conns == 1 && ws == 1
				if kept != tc.wantKept {
					t.Errorf("in an hour: %d connections, %d watches; want one of each: %t", conns, ws, tc.wantKept)
				}
				if pings < tc.minPings {
					t.Errorf("in an hour: %d pings, want at least %d: the connection must still be checked", pings, tc.minPings)
				}
				t.Logf("in an hour: %d connections, %d watches, %d pings", conns, ws, pings)
			})
		})
	}
}
