package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsapi/podsapi/fieldmask"
	podsv1alpha1 "github.com/podsapi/podsapi/gen/podsapi/pods/v1alpha1"
	"github.com/podsapi/podsapi/service"
	"github.com/podsapi/podsapi/store"
)

// floor-conn is a measurement, not a server: an h2c gRPC transport with one
// goroutine per connection that answers each unary call inline, on the
// goroutine that reads the connection, from bytes cached at start, and
// writes the whole response (HEADERS, DATA, trailers) with one flush. What
// it costs is what our handlers would cost on such a transport.

// Limits of a floor-conn connection.
const (
	floorConnMaxStreams     = 100      // SETTINGS_MAX_CONCURRENT_STREAMS we advertise
	floorConnMaxHeaderList  = 16 << 10 // SETTINGS_MAX_HEADER_LIST_SIZE we advertise
	floorConnMaxRequest     = 16 << 10 // request body bytes of one call (under the stream window)
	floorConnPrefaceTimeout = 10 * time.Second
	floorConnWriteBuffer    = 64 << 10
	floorConnMaxWindow      = 1<<31 - 1
)

// gRPC status codes floor-conn answers with.
const (
	grpcOK                = 0
	grpcInvalidArgument   = 3
	grpcNotFound          = 5
	grpcResourceExhausted = 8
	grpcUnimplemented     = 12
)

// floorResponses are the enveloped gRPC response messages floor-conn
// serves: the very bytes ours answers, built once by our service.
type floorResponses struct {
	empty []byte            // the empty message
	list  []byte            // ListPods of every pod, no selector, no mask
	get   map[string][]byte // GetPod by pod UID, no mask
}

// newFloorResponses builds the responses of our service on a store of pods,
// marshalled as connect marshals them.
func newFloorResponses(pods []*corev1.Pod) (*floorResponses, error) {
	st := store.New()
	for _, p := range pods {
		st.Upsert(p)
	}
	st.MarkSynced()
	h := service.New(st)
	ctx := context.Background()
	r := &floorResponses{empty: envelope(nil), get: make(map[string][]byte, len(pods))}
	lr, err := h.ListPods(ctx, connect.NewRequest(&podsv1alpha1.PodListRequest{}))
	if err != nil {
		return nil, err
	}
	b, err := proto.Marshal(lr.Msg)
	if err != nil {
		return nil, err
	}
	r.list = envelope(b)
	for _, p := range pods {
		gr, err := h.GetPod(ctx, connect.NewRequest(&podsv1alpha1.PodGetRequest{PodUID: string(p.UID)}))
		if err != nil {
			return nil, err
		}
		b, err := proto.Marshal(gr.Msg)
		if err != nil {
			return nil, err
		}
		r.get[string(p.UID)] = envelope(b)
	}
	return r, nil
}

// envelope returns msg in a gRPC length-prefixed envelope, uncompressed.
func envelope(msg []byte) []byte {
	b := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// serveFloorConn serves floor-conn on l until ctx is done, then closes every
// connection and returns once their goroutines have ended.
func serveFloorConn(ctx context.Context, l net.Listener, resp *floorResponses) error {
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		nc, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return ignoreClosed(err)
		}
		wg.Go(func() {
			defer nc.Close()
			stop := context.AfterFunc(ctx, func() { nc.Close() })
			defer stop()
			newFloorConn(nc, resp).serve()
		})
	}
}

// floorStream is one call of a floor-conn connection.
type floorStream struct {
	id      uint32
	method  string
	masked  bool // a field mask header was sent
	body    []byte
	ended   bool  // the client sent END_STREAM
	sendWin int64 // what the peer lets us send on the stream
	out     []byte
	blocked bool // waiting for a window to send out
}

// floorConn is the state of one connection, owned by its one goroutine.
type floorConn struct {
	nc   net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	fr   *http2.Framer
	resp *floorResponses

	henc *hpack.Encoder
	hbuf bytes.Buffer

	streams map[uint32]*floorStream
	lastID  uint32
	blocked []*floorStream // FIFO of streams waiting for a send window

	connWin      int64  // what the peer lets us send on the connection
	peerInitWin  int64  // the peer's SETTINGS_INITIAL_WINDOW_SIZE
	peerMaxFrame uint32 // the peer's SETTINGS_MAX_FRAME_SIZE
	unacked      uint32 // request bytes consumed, not yet given back
}

func newFloorConn(nc net.Conn, resp *floorResponses) *floorConn {
	c := &floorConn{
		nc: nc, br: bufio.NewReader(nc), bw: bufio.NewWriterSize(nc, floorConnWriteBuffer), resp: resp,
		streams: map[uint32]*floorStream{}, connWin: 65535, peerInitWin: 65535, peerMaxFrame: 16384,
	}
	c.fr = http2.NewFramer(c.bw, c.br)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = floorConnMaxHeaderList
	c.henc = hpack.NewEncoder(&c.hbuf)
	return c
}

// serve runs the connection until the peer leaves, an I/O error or a
// protocol error (after which the connection is closed by the caller).
func (c *floorConn) serve() {
	c.nc.SetReadDeadline(time.Now().Add(floorConnPrefaceTimeout))
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c.br, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	c.nc.SetReadDeadline(time.Time{})
	if c.fr.WriteSettings(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: floorConnMaxStreams},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: floorConnMaxHeaderList},
	) != nil {
		return
	}
	for {
		// Flush only when the next read may block: a request that
		// arrived whole is answered with one write.
		if !c.frameBuffered() && (c.bw.Buffered() > 0 || c.unacked > 0) {
			if c.flush() != nil {
				return
			}
		}
		f, err := c.fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				if c.resetStream(se.StreamID, se.Code) != nil {
					return
				}
				continue
			}
			c.goAway(err)
			return
		}
		if err := c.handle(f); err != nil {
			c.goAway(err)
			return
		}
	}
}

// frameBuffered reports whether a whole frame is buffered, so that reading
// it cannot block.
func (c *floorConn) frameBuffered() bool {
	n := c.br.Buffered()
	if n < 9 {
		return false
	}
	h, err := c.br.Peek(9)
	if err != nil {
		return false
	}
	return n >= 9+int(h[0])<<16|int(h[1])<<8|int(h[2])
}

// flush gives back the request bytes consumed and writes what is buffered.
func (c *floorConn) flush() error {
	if c.unacked > 0 {
		if err := c.fr.WriteWindowUpdate(0, c.unacked); err != nil {
			return err
		}
		c.unacked = 0
	}
	return c.bw.Flush()
}

// goAway tells the peer why the connection ends, on a protocol error.
func (c *floorConn) goAway(err error) {
	var ce http2.ConnectionError
	switch {
	case errors.As(err, &ce):
		c.fr.WriteGoAway(c.lastID, http2.ErrCode(ce), nil)
	case errors.Is(err, http2.ErrFrameTooLarge):
		c.fr.WriteGoAway(c.lastID, http2.ErrCodeFrameSize, nil)
	default:
		return // I/O: the peer is gone
	}
	c.bw.Flush()
}

// handle processes one frame.
func (c *floorConn) handle(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		if err := f.ForeachSetting(c.applySetting); err != nil {
			return err
		}
		if err := c.fr.WriteSettingsAck(); err != nil {
			return err
		}
		return c.resume()
	case *http2.PingFrame:
		if f.IsAck() {
			return nil
		}
		return c.fr.WritePing(true, f.Data)
	case *http2.WindowUpdateFrame:
		return c.windowUpdate(f)
	case *http2.MetaHeadersFrame:
		return c.headers(f)
	case *http2.DataFrame:
		return c.data(f)
	case *http2.RSTStreamFrame:
		if st := c.streams[f.StreamID]; st != nil {
			c.closeStream(st)
		}
		return nil
	case *http2.PushPromiseFrame:
		return http2.ConnectionError(http2.ErrCodeProtocol)
	case *http2.ContinuationFrame:
		return http2.ConnectionError(http2.ErrCodeProtocol) // ReadMetaHeaders merges the valid ones
	default: // PRIORITY, GOAWAY (the peer closes), unknown frames
		return nil
	}
}

// applySetting honours one setting of the peer.
func (c *floorConn) applySetting(s http2.Setting) error {
	if err := s.Valid(); err != nil {
		return err
	}
	switch s.ID {
	case http2.SettingInitialWindowSize:
		delta := int64(s.Val) - c.peerInitWin
		c.peerInitWin = int64(s.Val)
		for _, st := range c.streams {
			st.sendWin += delta
			if st.sendWin > floorConnMaxWindow {
				return http2.ConnectionError(http2.ErrCodeFlowControl)
			}
		}
	case http2.SettingMaxFrameSize:
		c.peerMaxFrame = s.Val
	case http2.SettingHeaderTableSize:
		c.henc.SetMaxDynamicTableSizeLimit(s.Val)
	}
	return nil
}

func (c *floorConn) windowUpdate(f *http2.WindowUpdateFrame) error {
	if f.StreamID == 0 {
		c.connWin += int64(f.Increment)
		if c.connWin > floorConnMaxWindow {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
		return c.resume()
	}
	st := c.streams[f.StreamID]
	if st == nil {
		return nil // a stream already closed
	}
	st.sendWin += int64(f.Increment)
	if st.sendWin > floorConnMaxWindow {
		return c.resetStream(st.id, http2.ErrCodeFlowControl)
	}
	return c.resume()
}

func (c *floorConn) headers(f *http2.MetaHeadersFrame) error {
	id := f.StreamID
	if id%2 == 0 || id <= c.lastID {
		// A new stream must have a new odd id; gRPC clients send no
		// trailers.
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	c.lastID = id
	if len(c.streams) >= floorConnMaxStreams {
		return c.fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
	}
	st := &floorStream{id: id, sendWin: c.peerInitWin, ended: f.StreamEnded()}
	c.streams[id] = st
	if f.Truncated {
		return c.reject(st, grpcResourceExhausted, "request headers too large")
	}
	if f.PseudoValue("method") != "POST" || !strings.HasPrefix(headerValue(f, "content-type"), "application/grpc") {
		return c.reject(st, grpcInvalidArgument, "not a gRPC request")
	}
	st.method = f.PseudoValue("path")
	st.masked = headerValue(f, fieldmask.Header) != "" || headerValue(f, fieldmask.BinaryHeader) != ""
	if st.ended {
		return c.answer(st)
	}
	return nil
}

// headerValue returns the first value of the regular header name.
func headerValue(f *http2.MetaHeadersFrame, name string) string {
	for _, hf := range f.RegularFields() {
		if hf.Name == name {
			return hf.Value
		}
	}
	return ""
}

func (c *floorConn) data(f *http2.DataFrame) error {
	// Padding counts against the window too.
	c.unacked += f.Header().Length
	st := c.streams[f.StreamID]
	if st == nil || st.ended {
		if f.StreamID > c.lastID {
			return http2.ConnectionError(http2.ErrCodeProtocol) // an idle stream
		}
		return nil // a stream already answered or reset
	}
	if len(st.body)+len(f.Data()) > floorConnMaxRequest {
		return c.reject(st, grpcResourceExhausted, fmt.Sprintf("request larger than %d bytes", floorConnMaxRequest))
	}
	st.body = append(st.body, f.Data()...)
	if f.StreamEnded() {
		st.ended = true
		return c.answer(st)
	}
	return nil
}

// answer replies to a whole request, inline.
func (c *floorConn) answer(st *floorStream) error {
	body := st.body
	if len(body) < 5 || body[0] != 0 || int(binary.BigEndian.Uint32(body[1:5])) != len(body)-5 {
		return c.reject(st, grpcInvalidArgument, "the request is not one uncompressed gRPC message")
	}
	msg := body[5:]
	switch st.method {
	case methodEmpty:
		return c.reply(st, c.resp.empty)
	case methodList, methodGet:
	default:
		return c.reject(st, grpcUnimplemented, "floor-conn has no method "+st.method)
	}
	if st.masked {
		return c.reject(st, grpcUnimplemented, "floor-conn serves no field masks")
	}
	if st.method == methodList {
		if len(msg) != 0 {
			return c.reject(st, grpcUnimplemented, "floor-conn serves only the unfiltered list")
		}
		return c.reply(st, c.resp.list)
	}
	uid := stringField(msg, 1)
	b, ok := c.resp.get[uid]
	if !ok {
		return c.reject(st, grpcNotFound, fmt.Sprintf("pod %q not found", uid))
	}
	return c.reply(st, b)
}

// writeHeaders writes one header block of hf on stream id.
func (c *floorConn) writeHeaders(id uint32, end bool, hf ...string) error {
	c.hbuf.Reset()
	for i := 0; i < len(hf); i += 2 {
		if err := c.henc.WriteField(hpack.HeaderField{Name: hf[i], Value: hf[i+1]}); err != nil {
			return err
		}
	}
	return c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hbuf.Bytes(), EndStream: end, EndHeaders: true})
}

// reply sends the enveloped message out on st, as far as the windows let.
func (c *floorConn) reply(st *floorStream, out []byte) error {
	if err := c.writeHeaders(st.id, false, ":status", "200", "content-type", "application/grpc"); err != nil {
		return err
	}
	st.out = out
	return c.send(st)
}

// send writes what the windows let of st's response, then its trailers once
// all is sent; a stream still waiting is queued for the next window update.
func (c *floorConn) send(st *floorStream) error {
	for len(st.out) > 0 {
		n := min(int64(len(st.out)), int64(c.peerMaxFrame), c.connWin, st.sendWin)
		if n <= 0 {
			if !st.blocked {
				st.blocked = true
				c.blocked = append(c.blocked, st)
			}
			return nil
		}
		if err := c.fr.WriteData(st.id, false, st.out[:n]); err != nil {
			return err
		}
		st.out = st.out[n:]
		c.connWin -= n
		st.sendWin -= n
	}
	if err := c.writeHeaders(st.id, true, "grpc-status", "0"); err != nil {
		return err
	}
	c.closeStream(st)
	return nil
}

// resume sends what new windows let of the streams waiting, in order.
func (c *floorConn) resume() error {
	waiting := c.blocked
	c.blocked = nil
	for i, st := range waiting {
		if c.streams[st.id] != st {
			continue // reset meanwhile
		}
		if c.connWin <= 0 {
			// The rest still wait (a reset one is skipped later).
			c.blocked = append(c.blocked, waiting[i:]...)
			return nil
		}
		st.blocked = false
		if err := c.send(st); err != nil {
			return err
		}
	}
	return nil
}

// reject answers st with a gRPC error (trailers only) and ends the stream,
// resetting it if the client is still sending.
func (c *floorConn) reject(st *floorStream, code int, msg string) error {
	if err := c.writeHeaders(st.id, true, ":status", "200", "content-type", "application/grpc",
		"grpc-status", fmt.Sprint(code), "grpc-message", grpcMessage(msg)); err != nil {
		return err
	}
	c.closeStream(st)
	if !st.ended {
		return c.fr.WriteRSTStream(st.id, http2.ErrCodeNo)
	}
	return nil
}

// resetStream resets stream id with code.
func (c *floorConn) resetStream(id uint32, code http2.ErrCode) error {
	if st := c.streams[id]; st != nil {
		c.closeStream(st)
	}
	return c.fr.WriteRSTStream(id, code)
}

func (c *floorConn) closeStream(st *floorStream) {
	delete(c.streams, st.id)
}

// grpcMessage percent-encodes msg as the grpc-message header requires.
func grpcMessage(msg string) string {
	var sb strings.Builder
	for i := 0; i < len(msg); i++ {
		if b := msg[i]; b < 0x20 || b > 0x7e || b == '%' {
			fmt.Fprintf(&sb, "%%%02X", b)
		} else {
			sb.WriteByte(b)
		}
	}
	return sb.String()
}
